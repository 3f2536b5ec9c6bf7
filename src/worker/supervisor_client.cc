#include "worker/supervisor_client.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "worker/fd_frames.h"

extern char** environ;

namespace ag::worker {
namespace {

constexpr int kAnswerTimeoutMs = 10000;
// Launches sent and not answered at most: the rest wait here (a wide gang's hundreds
// would fill the socket, each with a descriptor in flight).
constexpr size_t kMostInFlight = 16;

Result<int64_t> parse_answer(const std::string& reply) {
  if (reply.rfind("pid ", 0) == 0) return static_cast<int64_t>(std::atoll(reply.c_str() + 4));
  return internal_error(reply.rfind("error ", 0) == 0 ? reply.substr(6) : reply);
}

}  // namespace

namespace asio = boost::asio;

struct SupervisorClient::Watch {
  Watch(asio::io_context& io, int fd) : socket(io, fd), deadline(io) {}
  ~Watch() {
    deadline.cancel();
    socket.release();  // the client closes the descriptor
  }
  asio::posix::stream_descriptor socket;
  asio::steady_timer deadline;
  bool reading = false;
  // Handlers still queued when the watch goes find it expired.
  std::shared_ptr<bool> alive = std::make_shared<bool>(true);
};

SupervisorClient::SupervisorClient(std::string executable, asio::io_context* io)
    : executable_(std::move(executable)), io_(io) {}

SupervisorClient::~SupervisorClient() {
  // The supervisor stays: it goes on with the running tasks after this agent ends.
  watch_.reset();
  if (fd_ >= 0) ::close(fd_);
}

Status SupervisorClient::start(const std::string& agent_pid_file) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return internal_error(std::string("cannot start the task supervisor: socketpair: ") + std::strerror(errno));
  }
  // A fresh process of this same executable (not a fork of this multi-threaded one),
  // with its end of the socket as descriptor 3 and nothing else of the agent's.
  int child_end = ::fcntl(fds[1], F_DUPFD_CLOEXEC, 10);
  ::close(fds[1]);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, child_end, 3);
  std::string name = "ag", mode = kSupervisorCommand;
  std::string pid_file = agent_pid_file;
  char* argv[] = {name.data(), mode.data(), pid_file.data(), nullptr};
  pid_t pid = 0;
  int rc = posix_spawn(&pid, executable_.c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(child_end);
  if (rc != 0) {
    ::close(fds[0]);
    return internal_error(std::string("cannot start the task supervisor: ") + std::strerror(rc));
  }
  fd_ = fds[0];
  pid_ = pid;
  return {};
}

void SupervisorClient::finish(int wait_ms) {
  std::deque<Launch> unsent = std::move(queued_);
  queued_.clear();
  fail_sent("the worker is stopping");
  for (auto& launch : unsent) launch.answer(internal_error("the worker is stopping"));
  for (int waited = 0; pid_ > 0 && waited <= wait_ms; waited += 5) {
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = 0;
      break;
    }
    ::usleep(5000);
  }
}

void SupervisorClient::drop() {
  watch_.reset();
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void SupervisorClient::fail_sent(const std::string& why) {
  drop();
  std::deque<Answer> failed = std::move(waiting_);
  waiting_.clear();
  for (auto& answer : failed) answer(internal_error(why));
}

bool SupervisorClient::on_reaped(pid_t pid) {
  if (pid_ == 0 || pid != pid_) return false;
  // What it answered before it died still counts.
  while (!waiting_.empty() && fd_ >= 0) take_answer(0);
  fail_sent("the task supervisor died before it started the task");
  pid_ = 0;
  send_queued();  // to a new supervisor
  return true;
}

bool SupervisorClient::transmit(Launch& launch) {
  for (int attempt = 0;; ++attempt) {
    if (fd_ < 0) {
      if (Status s = start(agent_pid_file_); !s) {
        launch.answer(s.error());
        return false;
      }
    }
    if (write_frame(fd_, launch.payload, launch.output_fd)) return true;
    // The supervisor died since the last launch (with whatever it had not answered):
    // once more with a new one.
    fail_sent("the task supervisor died before it started the task");
    if (attempt > 0) {
      launch.answer(internal_error("the task supervisor does not take launch requests"));
      return false;
    }
  }
}

void SupervisorClient::send_queued() {
  while (!queued_.empty() && waiting_.size() < kMostInFlight) {
    Launch launch = std::move(queued_.front());
    queued_.pop_front();
    const bool first = waiting_.empty();
    if (!transmit(launch)) continue;  // answered with why not
    waiting_.push_back(std::move(launch.answer));
    watch();
    if (first) arm_deadline();
  }
}

void SupervisorClient::launch(const LaunchRequest& request, int output_fd, const std::string& agent_pid_file,
                              Answer answer) {
  if (has_nul(request)) return answer(invalid_argument("the task's command line or environment holds a NUL byte"));
  agent_pid_file_ = agent_pid_file;
  queued_.push_back({encode_launch(request), output_fd, std::move(answer)});
  send_queued();
}

void SupervisorClient::arm_deadline() {
  if (!watch_) return;
  if (waiting_.empty()) {
    watch_->deadline.cancel();
    return;
  }
  // A supervisor that does not answer within the deadline is no longer trusted to start
  // or record anything: it is killed (the agent ends its tasks once it reaps it) and the
  // next launch starts a new one.
  watch_->deadline.expires_after(std::chrono::milliseconds(kAnswerTimeoutMs));
  watch_->deadline.async_wait([this, alive = std::weak_ptr<bool>(watch_->alive)](const boost::system::error_code& ec) {
    if (ec || alive.expired()) return;
    if (pid_ > 0) ::kill(pid_, SIGKILL);
    fail_sent("the task supervisor did not answer the launch request");
    send_queued();
  });
}

Result<int64_t> SupervisorClient::launch(const LaunchRequest& request, int output_fd,
                                         const std::string& agent_pid_file) {
  std::optional<Result<int64_t>> result;
  launch(request, output_fd, agent_pid_file, [&result](Result<int64_t> r) { result = std::move(r); });
  // Launches sent before this one are answered first, each within the deadline.
  while (!result && !waiting_.empty()) take_answer(kAnswerTimeoutMs);
  if (!result) return internal_error("the task supervisor did not take the launch request");
  return std::move(*result);
}

void SupervisorClient::take_answer(int wait_ms) {
  pollfd pfd{fd_, POLLIN, 0};
  int ready;
  do {
    ready = ::poll(&pfd, 1, wait_ms);
  } while (ready < 0 && errno == EINTR);
  if (ready == 0 && wait_ms == 0) return;  // not yet
  std::string reply;
  int unused_fd = -1;
  const bool answered = ready > 0 && read_frame(fd_, &reply, &unused_fd);
  if (!answered) {
    // Silent, or gone (its socket closed), or out of step: not trusted any more.
    if (pid_ > 0) ::kill(pid_, SIGKILL);
    fail_sent(ready <= 0 ? "the task supervisor did not answer the launch request"
                         : "the task supervisor died before it started the task");
    send_queued();  // to a new supervisor
    return;
  }
  if (unused_fd >= 0) ::close(unused_fd);
  Answer answer = std::move(waiting_.front());
  waiting_.pop_front();
  arm_deadline();  // the next launch's deadline runs from now
  answer(parse_answer(reply));
  send_queued();
}

void SupervisorClient::watch() {
  if (!io_ || fd_ < 0 || waiting_.empty()) return;
  if (!watch_) watch_ = std::make_unique<Watch>(*io_, fd_);
  if (watch_->reading) return;
  watch_->reading = true;
  watch_->socket.async_wait(asio::posix::descriptor_base::wait_read,
                            [this, alive = std::weak_ptr<bool>(watch_->alive)](const boost::system::error_code& ec) {
                              if (alive.expired()) return;
                              watch_->reading = false;
                              if (ec) return;
                              // Every answer there is now (an answer may send more launches).
                              size_t before;
                              do {
                                before = waiting_.size();
                                if (fd_ >= 0 && before > 0) take_answer(0);
                              } while (fd_ >= 0 && !waiting_.empty() && waiting_.size() < before);
                              watch();
                            });
}

}  // namespace ag::worker
