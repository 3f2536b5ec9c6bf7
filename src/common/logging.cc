#include "common/logging.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace ag {

void init_logging(const std::string& path, bool verbose) {
  std::shared_ptr<spdlog::logger> logger;
  if (path.empty()) {
    logger = spdlog::stderr_logger_mt("ag");
  } else {
    logger = spdlog::basic_logger_mt("ag", path, /*truncate=*/false);
  }
  logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %^%l%$ %v");
  logger->set_level(verbose ? spdlog::level::debug : spdlog::level::info);
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
}

}  // namespace ag
