#include "core/logging.hpp"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/null_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

namespace rlx {

Logger make_root_logger(const LogOptions& options) {
  std::vector<spdlog::sink_ptr> sinks;
  if (options.to_stderr) sinks.push_back(std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  if (!options.file.empty())
    sinks.push_back(std::make_shared<spdlog::sinks::basic_file_sink_mt>(options.file, true));
  auto logger = std::make_shared<spdlog::logger>("rlx", sinks.begin(), sinks.end());
  logger->set_level(spdlog::level::from_str(options.level));
  logger->set_pattern("[%H:%M:%S.%e] [%^%l%$] [%n] %v");
  return logger;
}

Logger child_logger(const Logger& parent, const std::string& name) {
  auto logger = std::make_shared<spdlog::logger>(name, parent->sinks().begin(), parent->sinks().end());
  logger->set_level(parent->level());
  return logger;
}

Logger null_logger() {
  static Logger logger = std::make_shared<spdlog::logger>("null", std::make_shared<spdlog::sinks::null_sink_mt>());
  return logger;
}

}  // namespace rlx
