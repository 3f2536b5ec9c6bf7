#include "worker/async_command.h"

#include <fcntl.h>
#include <pty.h>
#include <sched.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <boost/asio/post.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <cstring>
#include <map>
#include <memory>

#include "common/scheduling.h"

extern char** environ;

namespace ag::worker {
namespace {

namespace asio = boost::asio;

constexpr size_t kKeptOutputBytes = 64 * 1024;

struct Running {
  Running(asio::io_context& io, int fd) : io(io), pipe(io, fd) {}
  asio::io_context& io;
  asio::posix::stream_descriptor pipe;
  std::array<char, 4096> buffer{};
  std::string partial;  // a line not ended yet
  std::string output;   // the last kKeptOutputBytes
  AsyncCommand::OnLine on_line;
  AsyncCommand::Done done;
  bool eof = false;
  bool exited = false;
  int exit_code = -1;
  bool finished = false;

  void finish_if_done() {
    if (!eof || !exited || finished) return;
    finished = true;
    if (!partial.empty() && on_line) on_line(partial);
    done({exit_code, output});
  }
};

// Commands still running, by pid; only touched on the io thread.
std::map<pid_t, std::shared_ptr<Running>>& running() {
  static std::map<pid_t, std::shared_ptr<Running>> commands;
  return commands;
}

void read_more(const std::shared_ptr<Running>& r) {
  r->pipe.async_read_some(asio::buffer(r->buffer), [r](const boost::system::error_code& ec, size_t n) {
    if (ec) {
      r->eof = true;
      r->finish_if_done();
      return;
    }
    std::string_view got(r->buffer.data(), n);
    r->output.append(got);
    if (r->output.size() > kKeptOutputBytes) r->output.erase(0, r->output.size() - kKeptOutputBytes);
    for (char c : got) {
      // Progress bars rewrite their line with '\r': each rewrite is a line here.
      if (c == '\n' || c == '\r') {
        if (!r->partial.empty() && r->on_line) r->on_line(r->partial);
        r->partial.clear();
      } else if (r->partial.size() < 4096) {
        r->partial.push_back(c);
      }
    }
    read_more(r);
  });
}

}  // namespace

void init_clean_spawn(posix_spawnattr_t* attr, short flags) {
  posix_spawnattr_init(attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(attr, &none);
  posix_spawnattr_setsigdefault(attr, &all);
  // The usual scheduling policy, not the agent's (common/scheduling.h).
  short reset_policy = 0;
  if (runs_as_daemon()) {
    const sched_param normal{};
    posix_spawnattr_setschedpolicy(attr, SCHED_OTHER);
    posix_spawnattr_setschedparam(attr, &normal);
    reset_policy = POSIX_SPAWN_SETSCHEDULER;
  }
  posix_spawnattr_setflags(attr,
                           static_cast<short>(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | reset_policy | flags));
}

pid_t spawn_with_output(std::vector<std::string> argv, int* read_fd, std::string* error, bool terminal,
                        bool own_group) {
  int fds[2];  // [0] read end (a terminal's master), [1] the command's output
  if (argv.empty()) {
    *error = "no command";
    return 0;
  }
  if (terminal) {
    winsize size{};
    size.ws_col = 200;
    size.ws_row = 50;
    if (::openpty(&fds[0], &fds[1], nullptr, nullptr, &size) != 0) {
      *error = std::string("openpty: ") + std::strerror(errno);
      return 0;
    }
    ::fcntl(fds[0], F_SETFD, FD_CLOEXEC);
    ::fcntl(fds[1], F_SETFD, FD_CLOEXEC);
  } else if (::pipe2(fds, O_CLOEXEC) != 0) {
    *error = std::string("pipe: ") + std::strerror(errno);
    return 0;
  }
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  posix_spawnattr_t attr;
  init_clean_spawn(&attr, own_group ? POSIX_SPAWN_SETPGROUP : 0);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, args[0], &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    *error = "cannot run " + argv[0] + ": " + std::strerror(rc);
    return 0;
  }
  *read_fd = fds[0];
  return pid;
}

void AsyncCommand::run(asio::io_context& io, std::vector<std::string> argv, OnLine on_line, Done done,
                       bool terminal) {
  int fd = -1;
  std::string why;
  pid_t pid = spawn_with_output(std::move(argv), &fd, &why, terminal);
  if (pid == 0) {
    asio::post(io, [done, why] { done({-1, why}); });
    return;
  }
  auto r = std::make_shared<Running>(io, fd);
  r->on_line = std::move(on_line);
  r->done = std::move(done);
  running()[pid] = r;
  read_more(r);
}

std::map<pid_t, std::function<void(int)>>& expected() {
  static std::map<pid_t, std::function<void(int)>> children;
  return children;
}

void AsyncCommand::expect_exit(pid_t pid, std::function<void(int status)> ended) { expected()[pid] = std::move(ended); }

bool AsyncCommand::reaped(pid_t pid, int status) {
  if (auto waiting = expected().find(pid); waiting != expected().end()) {
    auto ended = std::move(waiting->second);
    expected().erase(waiting);
    ended(status);
    return true;
  }
  auto it = running().find(pid);
  if (it == running().end()) return false;
  auto r = it->second;
  running().erase(it);
  r->exited = true;
  r->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r->finish_if_done();
  return true;
}

}  // namespace ag::worker
