#include "worker/health_checks.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <cstdlib>
#include <set>
#include <sstream>

#include "worker/async_command.h"

namespace ag::worker {
namespace {

namespace asio = boost::asio;

// How long a check's output may stay open after the check exited (a child it left in
// the background holding it) before it is closed.
constexpr int64_t kOutputAfterExitMs = 200;
constexpr size_t kReadTailBytes = 4096;
constexpr int kReasonLines = 5;

// "90 s", "1.5 s".
std::string seconds_text(int64_t ms) {
  std::ostringstream out;
  out << static_cast<double>(ms) / 1000 << " s";
  return out.str();
}

// The last few lines of `output`, at most kKeptCheckOutputBytes, on one line each
// separated by " | ".
std::string last_lines(const std::string& output) {
  std::vector<std::string> lines;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (!line.empty()) lines.push_back(line);
  }
  std::string out;
  const size_t first = lines.size() > kReasonLines ? lines.size() - kReasonLines : 0;
  for (size_t i = first; i < lines.size(); ++i) out += (out.empty() ? "" : " | ") + lines[i];
  if (out.size() > kKeptCheckOutputBytes) out = "..." + out.substr(out.size() - kKeptCheckOutputBytes);
  return out;
}

bool executable(const std::string& path) { return ::access(path.c_str(), X_OK) == 0; }

}  // namespace

// One check's run: its process group, its output and how it ended.
struct HealthChecks::Run {
  Run(asio::io_context& io, int fd) : pipe(io, fd) {}
  asio::posix::stream_descriptor pipe;
  std::array<char, 4096> buffer{};
  std::string tail;
  pid_t pid = 0;
  bool eof = false;
  bool exited = false;
  int status = 0;
  bool timed_out = false;
  bool reported = false;
  Timers::Id timeout = 0;
  Timers::Id after_exit = 0;
  std::shared_ptr<std::function<void()>> reader;  // reads the output to its end
};

HealthChecks::HealthChecks(asio::io_context& io, Timers& timers, HealthCheckConfig config, Report report)
    : io_(io), timers_(timers), config_(std::move(config)), report_(std::move(report)) {}

HealthChecks::~HealthChecks() {
  *alive_ = false;
  if (tick_) timers_.cancel(tick_);
  for (const auto& run : runs_) {
    if (!run->exited && run->pid > 0) ::kill(-run->pid, SIGKILL);
    if (run->timeout) timers_.cancel(run->timeout);
    if (run->after_exit) timers_.cancel(run->after_exit);
  }
}

void HealthChecks::start() {
  if (!config_.commands.empty()) run_round();
}

Status HealthChecks::check_commands(const std::vector<std::string>& commands) {
  static const std::set<std::string> kBuiltins = {"test", "[",    "true", "false", "exit", "echo", "printf", "command",
                                                  "type", "read", "set",  "cd",    "eval", "exec", ":"};
  for (const auto& command : commands) {
    std::istringstream words(command);
    std::string program;
    words >> program;
    if (program.empty()) {
      return invalid_argument(
          "--health-check: an empty command; give a command line such as "
          "'nvidia-smi -L' or '/usr/local/bin/check-node'");
    }
    // `VAR=value cmd`, quotes, subshells: the shell decides; only plain words are checked.
    if (program.find_first_of("='\"$(`{") != std::string::npos || kBuiltins.count(program)) continue;
    if (program.find('/') != std::string::npos) {
      if (!executable(program)) {
        return invalid_argument("--health-check '" + command + "': " + program +
                                " is not an executable file on this node; give the path of the check to run");
      }
      continue;
    }
    const char* path = std::getenv("PATH");
    const std::string dirs = path ? path : "/usr/bin:/bin";
    bool found = false;
    for (size_t start = 0; start <= dirs.size() && !found;) {
      const size_t colon = std::min(dirs.find(':', start), dirs.size());
      const std::string dir = dirs.substr(start, colon - start);
      found = !dir.empty() && executable(dir + "/" + program);
      start = colon + 1;
    }
    if (!found) {
      return invalid_argument("--health-check '" + command + "': " + program +
                              " is not a program on this node's PATH (" + dirs + "); install it or give its full path");
    }
  }
  return {};
}

void HealthChecks::run_round() {
  tick_ = 0;
  failures_.clear();
  runs_.clear();
  running_ = config_.commands.size();
  for (size_t i = 0; i < config_.commands.size(); ++i) {
    int fd = -1;
    std::string error;
    const pid_t pid = spawn_with_output({"/bin/sh", "-c", config_.commands[i]}, &fd, &error, false, true);
    if (pid == 0) {
      runs_.push_back(nullptr);
      asio::post(io_, [this, alive = alive_, i, error] {
        if (*alive) ended(i, "could not start: " + error);
      });
      continue;
    }
    auto run = std::make_shared<Run>(io_, fd);
    run->pid = pid;
    runs_.push_back(run);
    std::weak_ptr<Run> weak = run;
    const auto maybe_done = [this, alive = alive_, i, weak] {
      auto r = weak.lock();
      if (!*alive || !r || r->reported || !r->exited || !r->eof) return;
      r->reported = true;
      if (r->timeout) timers_.cancel(r->timeout);
      if (r->after_exit) timers_.cancel(r->after_exit);
      std::string failure;
      const std::string output = last_lines(r->tail);
      if (r->timed_out) {
        failure = "timed out after " + seconds_text(config_.timeout_ms) + " (killed)";
      } else if (WIFSIGNALED(r->status)) {
        failure = "killed by signal " + std::to_string(WTERMSIG(r->status));
      } else if (WIFEXITED(r->status) && WEXITSTATUS(r->status) != 0) {
        failure = "exited " + std::to_string(WEXITSTATUS(r->status));
      }
      if (!failure.empty() && !output.empty()) failure += ": " + output;
      ended(i, failure);
    };
    // The output: read to its end, keeping the last few KiB.
    auto read = std::make_shared<std::function<void()>>();
    *read = [weak, maybe_done, read_weak = std::weak_ptr<std::function<void()>>(read)] {
      auto r = weak.lock();
      if (!r) return;
      r->pipe.async_read_some(asio::buffer(r->buffer),
                              [weak, maybe_done, read_weak](const boost::system::error_code& ec, size_t n) {
                                auto r = weak.lock();
                                if (!r) return;
                                if (ec) {
                                  r->eof = true;
                                  return maybe_done();
                                }
                                r->tail.append(r->buffer.data(), n);
                                if (r->tail.size() > kReadTailBytes) r->tail.erase(0, r->tail.size() - kReadTailBytes);
                                if (auto again = read_weak.lock()) (*again)();
                              });
    };
    // Kept alive by the run until it is done.
    run->pipe.non_blocking(true);
    (*read)();
    run->reader = read;
    AsyncCommand::expect_exit(pid, [this, alive = alive_, weak, maybe_done](int status) {
      auto r = weak.lock();
      if (!*alive || !r) return;
      r->exited = true;
      r->status = status;
      ::kill(-r->pid, SIGKILL);  // what the check left behind goes with it
      if (r->eof) return maybe_done();
      r->after_exit = timers_.start(kOutputAfterExitMs, [weak, maybe_done] {
        if (auto r = weak.lock()) {
          r->after_exit = 0;
          boost::system::error_code ignored;
          r->pipe.close(ignored);
          r->eof = true;
          maybe_done();
        }
      });
    });
    run->timeout = timers_.start(config_.timeout_ms, [this, alive = alive_, weak, maybe_done] {
      auto r = weak.lock();
      if (!*alive || !r || r->exited) return;
      r->timeout = 0;
      r->timed_out = true;
      ::kill(-r->pid, SIGKILL);
      // A check stuck in the kernel (a hung GPU driver) does not die even so: the round
      // ends without it, failed; it is reaped whenever it goes.
      r->after_exit = timers_.start(kOutputAfterExitMs * 5, [weak, maybe_done] {
        auto r = weak.lock();
        if (!r || r->reported) return;
        r->after_exit = 0;
        r->exited = true;
        boost::system::error_code ignored;
        r->pipe.close(ignored);
        r->eof = true;
        maybe_done();
      });
    });
  }
}

void HealthChecks::ended(size_t index, const std::string& failure) {
  if (!failure.empty()) failures_.push_back("health check `" + config_.commands[index] + "` " + failure);
  if (--running_ == 0) round_done();
}

void HealthChecks::round_done() {
  runs_.clear();
  if (!failures_.empty()) {
    passes_ = 0;
    std::string reason;
    for (const auto& f : failures_) reason += (reason.empty() ? "" : "; ") + f;
    api::HealthReport report;
    report.healthy = false;
    report.reason = reason;
    unhealthy_ = report;
    report_(report);
  } else if (unhealthy_ && ++passes_ >= kPassesToRecover) {
    unhealthy_.reset();
    passes_ = 0;
    report_(api::HealthReport{});
  }
  tick_ = timers_.start(config_.interval_ms, [this, alive = alive_] {
    if (*alive) run_round();
  });
}

}  // namespace ag::worker
