// The run's report in the Prometheus text exposition format (version
// 0.0.4): what one line of metrics.jsonl holds, as counters (cumulative,
// `_total`), gauges and one histogram (accepted env steps by lag), every
// family with its HELP and TYPE. CAF-free; plain data in, text out.
#pragma once

#include <string>

#include "control/run_report.hpp"
#include "messages/types.hpp"

namespace rlx {

// `run_name` labels every sample (run="NAME"). The lag histogram's buckets
// are the lags 0..max_staleness (the learner's histogram, whose last entry
// holds every lag at or past the bound).
std::string prometheus_text(const MetricsData& learner, const RunCounts& run, const std::string& run_name);

// A label value escaped as the format wants (\\, \", \n).
std::string prometheus_label(const std::string& value);

}  // namespace rlx
