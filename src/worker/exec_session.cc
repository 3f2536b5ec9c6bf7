#include "worker/exec_session.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <boost/asio/ip/tcp.hpp>
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
    if (request.port > 0) return connect(request.port);
    Result<ExecOrders> orders = ExecOrders{};
    if (!target.value().container.empty()) {
      // Into the task's container, through its engine: the container's own user,
      // environment and directory.
      std::vector<std::string> command{target.value().engine_path, "exec"};
      if (request.with_stdin || request.tty) command.push_back("-i");
      if (request.tty) command.insert(command.end(), {"-t", "-e", "TERM=" + terminal_type(request.term)});
      command.push_back(target.value().container);
      command.insert(command.end(), request.command.begin(), request.command.end());
      orders.value().command = std::move(command);
      orders.value().dir = "/";
      for (char** e = environ; *e; ++e) orders.value().env.emplace_back(*e);
    } else {
      orders = orders_beside(target.value().pid, request.command, target.value().cgroups);
      if (!orders.ok()) return fail(orders.error().message);
      if (request.tty) set_env(orders.value().env, "TERM", terminal_type(request.term));
    }
    orders.value().terminal = request.tty;
    const std::string error = request.tty ? spawn_on_terminal(executable, orders.value(), {request.rows, request.cols})
                                          : spawn(executable, orders.value(), request.with_stdin);
    if (!error.empty()) return fail(error);
    spdlog::info("exec session {}: started pid {} beside task {}{}", request.session, pid_, request.task.to_string(),
                 request.tty ? " on a terminal" : "");
    AsyncCommand::expect_exit(pid_, [self](int status) { self->exited(status); });
    read(out_, ExecChannel::kStdout, out_buffer_, &out_open_);
    if (err_open_) read(err_, ExecChannel::kStderr, err_buffer_, &err_open_);
  }

 private:
  static std::string terminal_type(const std::string& term) { return term.empty() ? "xterm" : term; }

  static void set_env(std::vector<std::string>& env, const std::string& key, const std::string& value) {
    std::erase_if(env, [&](const std::string& entry) { return entry.rfind(key + "=", 0) == 0; });
    env.push_back(key + "=" + value);
  }

  // A port forward: one TCP connection to 127.0.0.1:port on this node (a container
  // task shares the node's network), its bytes in both directions; it ends when the
  // program behind the port closes it.
  void connect(int port) {
    connecting_ = true;
    auto socket = std::make_shared<asio::ip::tcp::socket>(io_);
    const asio::ip::tcp::endpoint to(asio::ip::make_address_v4("127.0.0.1"), static_cast<unsigned short>(port));
    socket->async_connect(to, [self = shared_from_this(), socket, port](boost::system::error_code ec) {
      self->connecting_ = false;
      if (self->head_gone_) return;
      if (ec) {
        return self->fail("cannot connect to 127.0.0.1:" + std::to_string(port) + " on the task's node: " +
                          ec.message() +
                          (ec == asio::error::connection_refused ? " (nothing listens on that port there)" : ""));
      }
      const int fd = socket->release();
      const int writing = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
      if (writing < 0) {
        ::close(fd);
        return self->fail(std::string("cannot use the connection: ") + std::strerror(errno));
      }
      self->in_.assign(writing);
      self->out_.assign(fd);
      self->socket_ = true;
      self->exited_ = true;  // the session ends with the connection
      self->status_.exit_code = 0;
      self->out_open_ = true;
      self->read(self->out_, ExecChannel::kStdout, self->out_buffer_, &self->out_open_);
      if (!self->stdin_.empty() || self->stdin_closing_) self->write_stdin();
    });
  }

  // Starts `ag __task-exec` with the session's pipes as its stdio and the orders on
  // descriptor 3; "" once it runs.
  std::string spawn(const std::string& executable, const ExecOrders& orders, bool with_stdin) {
    int out[2], err[2], in[2] = {-1, -1};
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0 || (with_stdin && ::pipe2(in, O_CLOEXEC) != 0)) {
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
    std::string error = start_helper(executable, orders, &actions);
    for (int fd : {out[1], err[1], in[0]}) {
      if (fd >= 0) ::close(fd);
    }
    if (!error.empty()) {
      for (int fd : {out[0], err[0], in[1]}) {
        if (fd >= 0) ::close(fd);
      }
      return error;
    }
    // Output comes in chunks of up to kExecChunkBytes, not the pipe's default 64 KiB
    // (the machine may cap it lower: then in smaller ones).
    for (int fd : {out[0], err[0]}) ::fcntl(fd, F_SETPIPE_SZ, static_cast<int>(api::kExecChunkBytes));
    out_.assign(out[0]);
    err_.assign(err[0]);
    if (with_stdin) in_.assign(in[1]);
    out_open_ = err_open_ = true;
    return "";
  }

  // The same on a new pseudo-terminal of `size`: its other side is the command's stdin,
  // stdout and stderr, and its controlling terminal (the helper starts a session).
  std::string spawn_on_terminal(const std::string& executable, const ExecOrders& orders, api::TerminalSize size) {
    const int master = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    char name[128];
    int slave = -1;
    if (master < 0 || ::grantpt(master) != 0 || ::unlockpt(master) != 0 || ::ptsname_r(master, name, sizeof name) != 0 ||
        (slave = ::open(name, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0) {
      const std::string why = std::strerror(errno);
      if (master >= 0) ::close(master);
      return "cannot make a pseudo-terminal: " + why;
    }
    resize(master, size);
    // The terminal belongs to the user the command runs as (as a login's does).
    if (orders.switch_user && ::fchown(slave, orders.uid, static_cast<gid_t>(-1)) != 0) {
      spdlog::warn("exec: cannot give {} to uid {}: {}", name, orders.uid, std::strerror(errno));
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    for (int fd = 0; fd < 3; ++fd) posix_spawn_file_actions_adddup2(&actions, slave, fd);
    std::string error = start_helper(executable, orders, &actions);
    ::close(slave);
    if (!error.empty()) {
      ::close(master);
      return error;
    }
    const int writing = ::fcntl(master, F_DUPFD_CLOEXEC, 0);
    if (writing < 0) {
      const std::string why = std::strerror(errno);
      ::close(master);
      ::kill(pid_, SIGKILL);  // the agent reaps it with its other children
      return "cannot use the pseudo-terminal: " + why;
    }
    in_.assign(writing);
    out_.assign(master);
    out_open_ = true;
    return "";
  }

  static void resize(int terminal, api::TerminalSize size) {
    if (size.rows <= 0 || size.cols <= 0) return;
    struct winsize ws {};
    ws.ws_row = static_cast<unsigned short>(size.rows);
    ws.ws_col = static_cast<unsigned short>(size.cols);
    ::ioctl(terminal, TIOCSWINSZ, &ws);
  }

  // Spawns `ag __task-exec` with `actions` for its stdio and the orders on descriptor 3.
  std::string start_helper(const std::string& executable, const ExecOrders& orders, posix_spawn_file_actions_t* actions) {
    int give[2];
    if (::pipe2(give, O_CLOEXEC) != 0) {
      posix_spawn_file_actions_destroy(actions);
      return std::string("cannot make the command's pipes: ") + std::strerror(errno);
    }
    posix_spawn_file_actions_adddup2(actions, give[0], 3);
    posix_spawnattr_t attr;
    // On a terminal the helper makes a session of its own; else a process group, so
    // that signals reach the command and its children.
    init_clean_spawn(&attr, orders.terminal ? 0 : POSIX_SPAWN_SETPGROUP);
    if (!orders.terminal) posix_spawnattr_setpgroup(&attr, 0);
    std::string name = "ag", mode = kTaskExecCommand;
    char* argv[] = {name.data(), mode.data(), nullptr};
    const int rc = posix_spawn(&pid_, executable.c_str(), actions, &attr, argv, environ);
    posix_spawn_file_actions_destroy(actions);
    posix_spawnattr_destroy(&attr);
    ::close(give[0]);
    if (rc != 0) {
      ::close(give[1]);
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
    return "";
  }

  void read(asio::posix::stream_descriptor& pipe, ExecChannel channel, std::string& buffer, bool* open) {
    boost::system::error_code ignored;
    pipe.non_blocking(true, ignored);  // the read-ahead below must never wait
    if (buffer.size() != 1 + api::kExecChunkBytes) buffer.assign(1 + api::kExecChunkBytes, '\0');
    buffer[0] = static_cast<char>(channel);
    pipe.async_read_some(asio::buffer(buffer.data() + 1, api::kExecChunkBytes),
                         [self = shared_from_this(), &pipe, channel, &buffer, open](boost::system::error_code ec, size_t n) {
                           if (ec || self->head_gone_) {
                             *open = false;
                             return self->finish_if_done();
                           }
                           // What the command wrote meanwhile joins this frame (fewer,
                           // fuller frames when output is fast; no wait when it is not).
                           while (n < api::kExecChunkBytes) {
                             const ssize_t more = ::read(pipe.native_handle(), buffer.data() + 1 + n,
                                                         api::kExecChunkBytes - n);
                             if (more <= 0) break;  // nothing more yet, or its end (the next read sees it)
                             n += static_cast<size_t>(more);
                           }
                           // A copy of what was read: the buffer is read into again.
                           self->ws_->send(std::string(buffer.data(), 1 + n), true);
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
    // Bytes for a port may come before the connection is made: they wait for it.
    if (!binary || data.empty() || (!in_.is_open() && !connecting_)) return;
    if (data[0] == static_cast<char>(ExecChannel::kResize) && in_.is_open()) {
      auto size = api::decode_terminal_size(std::string_view(data).substr(1));
      if (size.ok()) resize(in_.native_handle(), size.value());
      return;
    }
    if (data[0] != static_cast<char>(ExecChannel::kStdin)) return;
    if (data.size() == 1) {
      stdin_closing_ = true;
    } else {
      stdin_queued_ += data.size() - 1;
      stdin_.push_back(data.substr(1));
      if (stdin_queued_ > api::kExecHighWaterBytes) ws_->pause_reading();
    }
    if (!writing_ && !connecting_) write_stdin();
  }

  void write_stdin() {
    if (stdin_.empty()) {
      writing_ = false;
      if (!stdin_closing_ || !in_.is_open()) return;
      // A connection is only half closed: what comes back from the port still flows.
      if (socket_) ::shutdown(in_.native_handle(), SHUT_WR);
      boost::system::error_code ignored;
      in_.close(ignored);
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
  bool socket_ = false;      // a port forward's connection, not a command
  bool connecting_ = false;  // ... being made
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
