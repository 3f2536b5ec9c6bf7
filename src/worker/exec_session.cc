#include "worker/exec_session.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <cerrno>
#include <cstring>
#include <deque>
#include <spdlog/spdlog.h>

#include "api/exec_protocol.h"
#include "net/ws_client.h"
#include "worker/async_command.h"
#include "worker/exec_helper.h"

extern char** environ;

namespace ag::worker {
namespace {

namespace asio = boost::asio;
using api::ExecChannel;

constexpr auto kKillGrace = std::chrono::seconds(5);
// After the command exits, how long output its background children still hold open is
// waited for.
constexpr auto kOutputAfterExit = std::chrono::seconds(1);

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(asio::io_context& io, std::shared_ptr<size_t> running, std::shared_ptr<net::WsConnection> ws)
      : io_(io), running_(std::move(running)), ws_(std::move(ws)), out_(io), err_(io), in_(io), timer_(io) {
    ++*running_;
  }
  ~Session() { --*running_; }

  void run(const api::ExecOpen& request, const TaskLauncher& launcher, const std::string& executable) {
    auto self = shared_from_this();
    ws_->start([self](const std::string& data, bool binary) { self->from_head(data, binary); },
               [self](const std::string&) { self->head_closed(); });
    if (*running_ > ExecSessions::kMaxSessions) {
      return fail(std::to_string(ExecSessions::kMaxSessions) + " commands already run through `ag exec` on this node");
    }
    auto target = launcher.exec_target(request.task);
    if (!target.ok()) return fail(target.error().message);
    Result<ExecOrders> orders = ExecOrders{};
    if (!target.value().container.empty()) {
      // Into the task's container, through its engine: the container's own user,
      // environment and directory.
      std::vector<std::string> command{target.value().engine_path, "exec"};
      if (request.with_stdin) command.push_back("-i");
      command.push_back(target.value().container);
      command.insert(command.end(), request.command.begin(), request.command.end());
      orders.value().command = std::move(command);
      orders.value().dir = "/";
      for (char** e = environ; *e; ++e) orders.value().env.emplace_back(*e);
    } else {
      orders = orders_beside(target.value().pid, request.command, target.value().cgroups);
      if (!orders.ok()) return fail(orders.error().message);
    }
    if (std::string error = spawn(executable, orders.value(), request.with_stdin); !error.empty()) return fail(error);
    spdlog::info("exec session {}: started pid {} beside task {}", request.session, pid_, request.task.to_string());
    AsyncCommand::expect_exit(pid_, [self](int status) { self->exited(status); });
    read(out_, ExecChannel::kStdout, out_buffer_, &out_open_);
    read(err_, ExecChannel::kStderr, err_buffer_, &err_open_);
  }

 private:
  // Starts `ag __task-exec` with the session's pipes as its stdio and the orders on
  // descriptor 3; "" once it runs.
  std::string spawn(const std::string& executable, const ExecOrders& orders, bool with_stdin) {
    int out[2], err[2], in[2] = {-1, -1}, give[2];
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0 || (with_stdin && ::pipe2(in, O_CLOEXEC) != 0) ||
        ::pipe2(give, O_CLOEXEC) != 0) {
      return std::string("cannot make the command's pipes: ") + std::strerror(errno);
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    if (with_stdin) {
      posix_spawn_file_actions_adddup2(&actions, in[0], 0);
    } else {
      posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    }
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_adddup2(&actions, err[1], 2);
    posix_spawn_file_actions_adddup2(&actions, give[0], 3);
    posix_spawnattr_t attr;
    init_clean_spawn(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);  // signals reach the command and its children
    std::string name = "ag", mode = kTaskExecCommand;
    char* argv[] = {name.data(), mode.data(), nullptr};
    const int rc = posix_spawn(&pid_, executable.c_str(), &actions, &attr, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    for (int fd : {out[1], err[1], in[0], give[0]}) {
      if (fd >= 0) ::close(fd);
    }
    if (rc != 0) {
      for (int fd : {out[0], err[0], in[1], give[1]}) {
        if (fd >= 0) ::close(fd);
      }
      return std::string("cannot start the command: ") + std::strerror(rc);
    }
    const std::string text = encode_exec_orders(orders);
    for (size_t at = 0; at < text.size();) {
      const ssize_t n = ::write(give[1], text.data() + at, text.size() - at);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // the helper died: its exit says why
      at += static_cast<size_t>(n);
    }
    ::close(give[1]);
    out_.assign(out[0]);
    err_.assign(err[0]);
    if (with_stdin) in_.assign(in[1]);
    out_open_ = err_open_ = true;
    return "";
  }

  void read(asio::posix::stream_descriptor& pipe, ExecChannel channel, std::string& buffer, bool* open) {
    buffer.assign(1 + api::kExecChunkBytes, '\0');
    buffer[0] = static_cast<char>(channel);
    pipe.async_read_some(asio::buffer(buffer.data() + 1, api::kExecChunkBytes),
                         [self = shared_from_this(), &pipe, channel, &buffer, open](boost::system::error_code ec, size_t n) {
                           if (ec || self->head_gone_) {
                             *open = false;
                             return self->finish_if_done();
                           }
                           self->ws_->send(buffer.substr(0, 1 + n), true);
                           if (self->ws_->queued_bytes() <= api::kExecHighWaterBytes) {
                             return self->read(pipe, channel, buffer, open);
                           }
                           // The head (or the client behind it) is slow: the command
                           // waits on its full pipe until the queue drains.
                           self->parked_.push_back([self, &pipe, channel, &buffer, open] {
                             self->read(pipe, channel, buffer, open);
                           });
                           self->ws_->on_drained(api::kExecHighWaterBytes / 2, [self] {
                             auto parked = std::move(self->parked_);
                             self->parked_.clear();
                             for (auto& resume : parked) resume();
                           });
                         });
  }

  void from_head(const std::string& data, bool binary) {
    if (!binary || data.empty() || data[0] != static_cast<char>(ExecChannel::kStdin) || !in_.is_open()) return;
    if (data.size() == 1) {
      stdin_closing_ = true;
    } else {
      stdin_queued_ += data.size() - 1;
      stdin_.push_back(data.substr(1));
      if (stdin_queued_ > api::kExecHighWaterBytes) ws_->pause_reading();
    }
    if (!writing_) write_stdin();
  }

  void write_stdin() {
    if (stdin_.empty()) {
      writing_ = false;
      if (stdin_closing_ && in_.is_open()) in_.close();
      return;
    }
    writing_ = true;
    asio::async_write(in_, asio::buffer(stdin_.front()), [self = shared_from_this()](boost::system::error_code ec, size_t) {
      if (ec) {  // the command closed its stdin: what it would not read is dropped
        self->stdin_.clear();
        self->stdin_queued_ = 0;
        self->writing_ = false;
        boost::system::error_code ignored;
        self->in_.close(ignored);
        self->ws_->resume_reading();
        return;
      }
      self->stdin_queued_ -= self->stdin_.front().size();
      self->stdin_.pop_front();
      if (self->stdin_queued_ <= api::kExecHighWaterBytes / 2) self->ws_->resume_reading();
      self->write_stdin();
    });
  }

  void exited(int status) {
    exited_ = true;
    if (WIFEXITED(status)) status_.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) status_.signal = WTERMSIG(status);
    if (head_gone_) return;
    finish_if_done();
    if (finished_) return;
    timer_.expires_after(kOutputAfterExit);
    timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (!ec) self->finish();
    });
  }

  void finish_if_done() {
    if (exited_ && !out_open_ && !err_open_) finish();
  }

  void finish() {
    if (finished_) return;
    finished_ = true;
    timer_.cancel();
    ws_->send(api::exec_frame(ExecChannel::kStatus, api::encode_exec_status(status_)), true);
    ws_->close();
    close_pipes();
  }

  void fail(const std::string& error) {
    spdlog::warn("exec: {}", error);
    finished_ = true;
    ws_->send(api::exec_frame(ExecChannel::kStatus, api::encode_exec_status({std::nullopt, std::nullopt, error})),
              true);
    ws_->close();
  }

  void head_closed() {
    head_gone_ = true;
    close_pipes();
    if (finished_ || exited_ || pid_ <= 0) return;
    // The client went: the command (and what it started) is told, then made to end.
    ::kill(-pid_, SIGHUP);
    timer_.expires_after(kKillGrace);
    timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (!ec && !self->exited_) ::kill(-self->pid_, SIGKILL);
    });
  }

  void close_pipes() {
    boost::system::error_code ignored;
    out_.close(ignored);
    err_.close(ignored);
    in_.close(ignored);
  }

  asio::io_context& io_;
  std::shared_ptr<size_t> running_;
  std::shared_ptr<net::WsConnection> ws_;
  asio::posix::stream_descriptor out_, err_, in_;
  asio::steady_timer timer_;
  std::string out_buffer_, err_buffer_;
  bool out_open_ = false, err_open_ = false;
  std::vector<std::function<void()>> parked_;
  std::deque<std::string> stdin_;
  size_t stdin_queued_ = 0;
  bool writing_ = false, stdin_closing_ = false;
  pid_t pid_ = 0;
  bool exited_ = false, finished_ = false, head_gone_ = false;
  api::ExecStatus status_;
};

}  // namespace

void ExecSessions::open(const api::ExecOpen& request) {
  net::WsDialOptions options;
  options.to = deps_.head();
  options.target = api::kWorkerExecPath + request.session;
  options.headers["Authorization"] = "Bearer " + deps_.token();
  net::ws_dial(deps_.io, options,
               [io = &deps_.io, running = running_, request, launcher = &deps_.launcher,
                executable = deps_.executable](Result<std::shared_ptr<net::WsConnection>> ws) {
                 if (!ws.ok()) {
                   spdlog::warn("exec session {}: cannot dial the head back: {}", request.session, ws.error().message);
                   return;
                 }
                 std::make_shared<Session>(*io, running, ws.value())->run(request, *launcher, executable);
               });
}

}  // namespace ag::worker
