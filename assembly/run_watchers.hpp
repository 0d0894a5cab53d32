// What watches a run from outside (docs/operating.md): the HTTP endpoint
// (Prometheus, the live page), the TensorBoard event file and the alerts'
// webhook, started
// before the run is prepared and fed by the coordinator's on_report hook.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "control/alerts.hpp"
#include "control/live_history.hpp"
#include "control/coordinator.hpp"
#include "control/tensorboard.hpp"
#include "core/config.hpp"
#include "core/logging.hpp"
#include "transport/metrics_endpoint.hpp"
#include "transport/webhook.hpp"

namespace rlx {

struct RunWatchers {
  std::shared_ptr<MetricsBoard> board;          // what the endpoint serves
  std::unique_ptr<MetricsEndpoint> endpoint;    // [metrics] prometheus or page
  bool prometheus = false;                      // the endpoint serves GET /metrics
  std::shared_ptr<LiveHistory> history;         // [metrics] page: what live.json holds
  std::shared_ptr<TensorBoardWriter> tensorboard;
  std::shared_ptr<WebhookSender> webhook;       // [alerts]
  std::shared_ptr<AlertRules> alerts;

  // The coordinator's hook, every metrics line; empty when nothing watches.
  std::function<void(const MetricsData&, const RunCounts&)> on_report(const std::string& run_name,
                                                                     const Logger& log) const;
  // The run's end, to the webhook and the live page; `wait`: deliver it
  // (within the webhook's timeout) before returning.
  void ended(RunOutcome outcome, const std::string& summary, bool wait) const;
};

// Errc::config_range: a webhook that is not a URL (bad input); Errc::io: a
// port the endpoint cannot take. TensorBoard that cannot be written is
// logged, not an error (like metrics.jsonl).
Result<RunWatchers> start_watchers(const ClusterConfig& config, std::shared_ptr<StrangerWatch> strangers,
                                   const Logger& log);

}  // namespace rlx
