// The logging facade. Library code receives a Logger (a shared spdlog
// logger) from its owner; nothing looks loggers up by global name.
#pragma once

#include <memory>
#include <string>

#include <spdlog/spdlog.h>

namespace rlx {

using Logger = std::shared_ptr<spdlog::logger>;

// Log level and destination for a whole process; built by main().
struct LogOptions {
  std::string level = "info";  // trace | debug | info | warn | error | off
  std::string file;            // also write to this file when not empty
  bool to_stderr = true;       // write to stderr
};

// Creates the root logger of a process. Child loggers share its sinks.
Logger make_root_logger(const LogOptions& options);

// A logger named `name` (e.g. "explorer/3") writing to `parent`'s sinks.
Logger child_logger(const Logger& parent, const std::string& name);

// A logger that drops everything (tests, benchmarks).
Logger null_logger();

}  // namespace rlx
