#include "common/logging.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <vector>

namespace ag {
namespace {

constexpr const char* kPattern = "%Y-%m-%d %H:%M:%S.%e %^%l%$ %v";

// "%*": the sd-daemon priority prefix of a line's level ("<6>" for info), which
// journald reads off each line it gets on a service's stderr.
class JournalPriorityFlag : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm& /*time*/, spdlog::memory_buf_t& dest) override {
    static constexpr const char* kPrefixes[] = {"<7>", "<7>", "<6>", "<4>", "<3>", "<2>", "<6>"};
    const auto level = static_cast<size_t>(msg.level);
    const char* prefix = kPrefixes[level < std::size(kPrefixes) ? level : 2];
    dest.append(prefix, prefix + 3);
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<JournalPriorityFlag>(); }
};

}  // namespace

// JOURNAL_STREAM is "DEVICE:INODE" of the stream systemd gave the service; a child
// whose output was redirected elsewhere still inherits the variable, so the numbers
// must match the descriptor's.
bool is_journal_stream(int fd) {
  const char* stream = std::getenv("JOURNAL_STREAM");
  if (stream == nullptr) return false;
  struct stat st {};
  if (::fstat(fd, &st) != 0) return false;
  unsigned long long device = 0;
  unsigned long long inode = 0;
  if (std::sscanf(stream, "%llu:%llu", &device, &inode) != 2) return false;
  return device == st.st_dev && inode == st.st_ino;
}

std::string init_logging(const LogTargets& targets) {
  std::vector<spdlog::sink_ptr> sinks;
  std::string problem;
  if (!targets.file_path.empty()) {
    // spdlog opens with fopen (mode 0666 less the umask); the file is made 0640 first.
    int fd = ::open(targets.file_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
    if (fd >= 0) ::close(fd);
    try {
      auto file = std::make_shared<spdlog::sinks::basic_file_sink_mt>(targets.file_path, /*truncate=*/false);
      file->set_pattern(kPattern);
      sinks.push_back(std::move(file));
    } catch (const spdlog::spdlog_ex& e) {
      problem = "cannot write the log file " + targets.file_path + ": " + e.what();
    }
  }
  if (targets.to_stderr || sinks.empty()) {
    auto err = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    if (is_journal_stream(STDERR_FILENO)) {
      auto formatter = std::make_unique<spdlog::pattern_formatter>();
      formatter->add_flag<JournalPriorityFlag>('*').set_pattern("%*%l %v");
      err->set_formatter(std::move(formatter));
    } else {
      err->set_pattern(kPattern);
    }
    sinks.push_back(std::move(err));
  }
  auto logger = std::make_shared<spdlog::logger>("ag", sinks.begin(), sinks.end());
  logger->set_level(targets.verbose ? spdlog::level::debug : spdlog::level::info);
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
  return problem;
}

}  // namespace ag
