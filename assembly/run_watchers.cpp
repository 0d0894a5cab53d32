#include "assembly/run_watchers.hpp"

#include <chrono>
#include <filesystem>

#include "control/prometheus.hpp"
#include "core/files.hpp"

namespace rlx {

namespace {

// Its port goes to <log_dir>/metrics_port (what a scrape configuration, a
// browser or a test reads when the port was 0).
Result<std::unique_ptr<MetricsEndpoint>> start_endpoint(const ClusterConfig& config,
                                                          std::shared_ptr<MetricsBoard> board,
                                                          std::shared_ptr<StrangerWatch> strangers, const Logger& log) {
  MetricsEndpointOptions mo;
  mo.host = config.metrics.host;
  mo.port = static_cast<std::uint16_t>(config.metrics.port);
  mo.board = std::move(board);
  mo.watch = std::move(strangers);
  mo.log = child_logger(log, "metrics");
  mo.metrics = config.metrics.prometheus;
  mo.page = config.metrics.page;
  auto served = MetricsEndpoint::start(std::move(mo));
  if (!served) return served.error();
  const auto port = (*served)->port();
  std::error_code ec;
  std::filesystem::create_directories(config.run.log_dir, ec);
  const auto file = std::filesystem::path(config.run.log_dir) / "metrics_port";
  if (auto w = write_text_atomically(file, std::to_string(port) + "\n"); !w) return w.error();
  if (config.metrics.prometheus) log->info("Prometheus metrics on http://{}:{}/metrics", config.metrics.host, port);
  if (config.metrics.page) log->info("the live page on http://{}:{}/", config.metrics.host, port);
  return served;
}

}  // namespace

Result<RunWatchers> start_watchers(const ClusterConfig& config, std::shared_ptr<StrangerWatch> strangers,
                                   const Logger& log) {
  RunWatchers w;
  if (config.metrics.prometheus || config.metrics.page) {
    w.board = std::make_shared<MetricsBoard>();
    auto served = start_endpoint(config, w.board, std::move(strangers), log);
    if (!served) return served.error();
    w.endpoint = std::move(*served);
    w.prometheus = config.metrics.prometheus;
    if (config.metrics.page) w.history = std::make_shared<LiveHistory>(config.run.name);
  }
  if (config.metrics.tensorboard) {
    // Like metrics.jsonl: a run whose curves cannot be written still runs, and says so.
    auto opened = TensorBoardWriter::open(std::filesystem::path(config.run.log_dir) / "tensorboard");
    if (opened)
      w.tensorboard = std::move(*opened);
    else
      log->error("no TensorBoard curves: {}", opened.error().message);
  }
  if (!config.alerts.webhook.empty()) {
    auto sender = WebhookSender::start(config.alerts.webhook,
                                       std::chrono::milliseconds(static_cast<std::int64_t>(config.alerts.timeout_s * 1e3)),
                                       child_logger(log, "alerts"));
    if (!sender) return sender.error();
    w.webhook = std::move(*sender);
    w.alerts = std::make_shared<AlertRules>(config.alerts, config.run.name);
  }
  return w;
}

std::function<void(const MetricsData&, const RunCounts&)> RunWatchers::on_report(const std::string& run_name,
                                                                                 const Logger& log) const {
  if (!board && !webhook && !tensorboard) return {};
  return [board = board, history = history, prometheus = prometheus, webhook = webhook, alerts = alerts,
          tensorboard = tensorboard, log, name = run_name,
          failed = std::make_shared<bool>(false)](const MetricsData& m, const RunCounts& r) {
    if (prometheus) board->publish(prometheus_text(m, r, name));
    if (history) {
      history->add(m, r);
      board->publish_live(history->json());
    }
    if (tensorboard && !*failed) {
      const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
      if (auto w = tensorboard->write(static_cast<std::int64_t>(m.env_steps), now, tensorboard_scalars(m, r)); !w) {
        *failed = true;  // said once; metrics.jsonl goes on
        log->error("TensorBoard curves stop here: {}", w.error().message);
      }
    }
    if (webhook)
      for (const auto& alert : alerts->check(m, r)) webhook->post(alert.text);
  };
}

void RunWatchers::ended(RunOutcome outcome, const std::string& summary, bool wait) const {
  if (history) {
    history->ended(outcome_name(outcome), summary);
    board->publish_live(history->json());
  }
  if (!webhook) return;
  webhook->post(alerts->ended(outcome_name(outcome), summary).text);
  if (wait) webhook->finish();
}

}  // namespace rlx
