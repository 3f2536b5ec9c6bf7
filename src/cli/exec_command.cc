// `ag exec JOB [--task-index N | --all-ranks] [-i] [-t] -- CMD...`: runs CMD beside a
// running task and passes its stdout and stderr here, each to its own stream; its exit
// code is ag's (128 + N for a signal N, as a shell reports it). With -i this process's
// input goes to the command's stdin; with -t the command runs on a pseudo-terminal that
// follows this one (raw mode here, restored on any exit; the window's size and its
// changes reach the remote side). --all-ranks runs it beside every task at once, each
// line prefixed "[rank N]". The wire is api/exec_protocol.h.
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <csignal>
#include <future>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "api/exec_protocol.h"
#include "cli/api_client.h"
#include "cli/commands.h"
#include "cli/exec_dial.h"
#include "net/ws_client.h"

namespace ag::cli {
namespace {

namespace asio = boost::asio;
using api::ExecChannel;

void write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // a closed pipe (ag exec ... | head): the rest is dropped
    data += n;
    size -= static_cast<size_t>(n);
  }
}

// This terminal in raw mode while the remote one is in charge: keys go through as
// bytes (Ctrl-C, Ctrl-D included) and the remote side echoes. Restored on every exit.
class RawTerminal {
 public:
  RawTerminal() {
    if (::tcgetattr(0, &saved_) != 0) return;
    termios raw = saved_;
    ::cfmakeraw(&raw);
    on_ = ::tcsetattr(0, TCSANOW, &raw) == 0;
  }
  ~RawTerminal() { restore(); }
  RawTerminal(const RawTerminal&) = delete;
  RawTerminal& operator=(const RawTerminal&) = delete;
  void restore() {
    if (on_) ::tcsetattr(0, TCSANOW, &saved_);
    on_ = false;
  }

 private:
  termios saved_{};
  bool on_ = false;
};

api::TerminalSize terminal_size() {
  winsize ws{};
  if (::ioctl(1, TIOCGWINSZ, &ws) != 0 || ws.ws_row == 0 || ws.ws_col == 0) return {24, 80};
  return {ws.ws_row, ws.ws_col};
}

// One rank's output to `fd`, each line prefixed "[rank N] " (what is left of a last
// line without a newline gets one at the end).
class RankLines {
 public:
  RankLines(int fd, int rank) : fd_(fd), prefix_("[rank " + std::to_string(rank) + "] ") {}
  void write(std::string_view bytes) {
    for (size_t newline; (newline = bytes.find('\n')) != std::string_view::npos;) {
      const std::string line = prefix_ + partial_ + std::string(bytes.substr(0, newline + 1));
      write_all(fd_, line.data(), line.size());
      partial_.clear();
      bytes.remove_prefix(newline + 1);
    }
    partial_ += bytes;
  }
  void flush() {
    if (partial_.empty()) return;
    write("\n");
  }

 private:
  int fd_;
  std::string prefix_;
  std::string partial_;
};

// One rank's session: where its output goes and how it ended.
struct Remote {
  int rank = 0;
  std::shared_ptr<net::WsConnection> ws;
  std::optional<Error> failed;
  std::optional<api::ExecStatus> ended;
  std::unique_ptr<RankLines> out, err;  // --all-ranks only
};

// Passes this process's input to the session, a chunk at a time while little is
// queued; read on a thread of its own (a file, a pipe and a terminal alike), which may
// outlive the call (blocked in read()).
void pump_stdin(std::shared_ptr<asio::io_context> io, std::shared_ptr<net::WsConnection> ws) {
  std::thread([io, ws] {
    std::string chunk(api::kExecChunkBytes, '\0');
    for (;;) {
      const ssize_t n = ::read(0, chunk.data(), chunk.size());
      if (n < 0 && errno == EINTR) continue;
      auto sent = std::make_shared<std::promise<void>>();
      std::string frame =
          api::exec_frame(ExecChannel::kStdin, n > 0 ? std::string_view(chunk.data(), static_cast<size_t>(n)) : "");
      asio::post(*io, [ws, sent, frame = std::move(frame)]() mutable {
        ws->send(std::move(frame), true);
        if (ws->queued_bytes() <= api::kExecHighWaterBytes) return sent->set_value();
        ws->on_drained(api::kExecHighWaterBytes / 2, [sent, once = std::make_shared<bool>(false)] {
          if (!*once) sent->set_value();
          *once = true;
        });
      });
      sent->get_future().wait();
      if (n <= 0) return;
    }
  }).detach();
}

// The exit code for how the sessions ended (the first rank that did not succeed
// decides); errors are said on stderr.
int outcome(const std::vector<std::unique_ptr<Remote>>& remotes, bool prefixed) {
  int code = 0;
  for (const auto& r : remotes) {
    const std::string who = prefixed ? "rank " + std::to_string(r->rank) + ": " : "";
    int rank_code = 0;
    if (r->failed) {
      rank_code = fail(Error{r->failed->code, who + r->failed->message});
    } else if (!r->ended) {
      rank_code = fail(Error{ErrorCode::kUnavailable, who + "the connection to the head closed before the command ended"});
    } else if (!r->ended->error.empty()) {
      rank_code = fail(Error{ErrorCode::kConflict, who + r->ended->error});
    } else if (r->ended->signal) {
      rank_code = 128 + *r->ended->signal;
    } else {
      rank_code = r->ended->exit_code.value_or(1);
    }
    if (code == 0) code = rank_code;
  }
  return code;
}

// How many tasks the job's latest attempt has (1 when it has none yet: the head's
// refusal of rank 0 then says why).
Result<int> gang_size(const Connection& conn, const std::string& job_id) {
  auto job = call_json(conn, "GET", "/api/jobs/" + net::url_encode(job_id));
  if (!job.ok()) return job.error();
  const auto& attempts = job.value().value("attempts", nlohmann::json::array());
  if (!attempts.is_array() || attempts.empty()) return 1;
  const auto& tasks = attempts.back().value("tasks", nlohmann::json::array());
  return std::max<int>(1, static_cast<int>(tasks.size()));
}

}  // namespace

int exec(const ConnectionOptions& options, const ExecOptions& o) {
  const std::string& job_id = o.job_id;
  if (o.command.empty()) return usage_error("give the command to run after `--`: ag exec " + job_id + " -- nvidia-smi");
  if (Status s = api::check_exec_command(o.command); !s) return usage_error(s.error().message);
  if (o.tty && (!::isatty(0) || !::isatty(1))) {
    return usage_error("-t needs a terminal here (stdin and stdout), and this ag runs without one; drop -t: ag exec " +
                       job_id + " -i -- CMD passes input through a pipe");
  }
  if (o.all_ranks && (o.with_stdin || o.tty)) {
    return usage_error("--all-ranks runs the command beside every task without input; drop -i and -t, or pick one "
                       "task with --task-index N");
  }
  if (o.all_ranks && o.task_index_given) {
    return usage_error("--all-ranks and --task-index both say which tasks; give one of them");
  }
  auto conn = resolve_connection(options);
  if (!conn.ok()) return fail(conn.error());
  std::vector<int> ranks{o.task_index};
  if (o.all_ranks) {
    auto size = gang_size(conn.value(), job_id);
    if (!size.ok()) return fail(size.error());
    ranks.clear();
    for (int i = 0; i < size.value(); ++i) ranks.push_back(i);
  }
  std::string query;
  for (const auto& arg : o.command) query += "&command=" + net::url_encode(arg);
  if (o.with_stdin || o.tty) query += "&stdin=1";
  if (o.tty) {
    const api::TerminalSize size = terminal_size();
    const char* term = std::getenv("TERM");
    query += "&tty=1&rows=" + std::to_string(size.rows) + "&cols=" + std::to_string(size.cols) +
             "&term=" + net::url_encode(term ? term : "xterm");
  }

  // Output piped to another program goes in pieces as large as the frames that carry it
  // (a pipe holds 64 KiB by default: four wake-ups of the reader per frame).
  for (int fd : {1, 2}) {
    struct stat st {};
    if (::fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode)) ::fcntl(fd, F_SETPIPE_SZ, static_cast<int>(api::kExecChunkBytes));
  }
  // Shared with the input thread, which may outlive this call.
  auto io = std::make_shared<asio::io_context>();
  std::vector<std::unique_ptr<Remote>> remotes;
  size_t open = ranks.size();
  const auto closed = [&] {
    if (--open == 0) io->stop();
  };
  std::optional<RawTerminal> raw;
  asio::signal_set window(*io);
  std::function<void()> watch_window;  // -t: each SIGWINCH sends the new size
  asio::signal_set ending(*io, SIGTERM, SIGHUP);
  ending.async_wait([&](boost::system::error_code ec, int) {
    if (ec) return;
    for (auto& r : remotes) {
      if (r->ws) r->ws->close();
    }
    io->stop();
  });
  for (int rank : ranks) {
    auto& remote = *remotes.emplace_back(std::make_unique<Remote>());
    remote.rank = rank;
    if (o.all_ranks) {
      remote.out = std::make_unique<RankLines>(1, rank);
      remote.err = std::make_unique<RankLines>(2, rank);
    }
    const std::string target = "/api/jobs/" + net::url_encode(job_id) + "/exec?task_index=" + std::to_string(rank) + query;
    net::ws_dial(*io, exec_dial(conn.value(), target), [&, r = &remote](Result<std::shared_ptr<net::WsConnection>> dialled) {
      if (!dialled.ok()) {
        r->failed = dialled.error();
        return closed();
      }
      r->ws = dialled.value();
      r->ws->start(
          [r](const std::string& data, bool binary) {
            if (!binary || data.empty()) return;
            const std::string_view bytes = std::string_view(data).substr(1);
            switch (static_cast<ExecChannel>(data[0])) {
              case ExecChannel::kStdout:
                r->out ? r->out->write(bytes) : write_all(1, bytes.data(), bytes.size());
                break;
              case ExecChannel::kStderr:
                r->err ? r->err->write(bytes) : write_all(2, bytes.data(), bytes.size());
                break;
              case ExecChannel::kStatus:
                if (auto status = api::decode_exec_status(bytes); status.ok()) r->ended = status.value();
                break;
              default:
                break;
            }
          },
          [r, &closed](const std::string&) {
            if (r->out) r->out->flush();
            if (r->err) r->err->flush();
            closed();
          });
      if (o.tty) {
        // The remote terminal is in charge from here; this one's size follows it.
        raw.emplace();
        window.add(SIGWINCH);
        watch_window = [&window, &watch_window, ws = r->ws] {
          window.async_wait([&watch_window, ws](boost::system::error_code ec, int) {
            if (ec) return;
            ws->send(api::exec_frame(ExecChannel::kResize, api::encode_terminal_size(terminal_size())), true);
            watch_window();
          });
        };
        watch_window();
      }
      if (o.with_stdin || o.tty) pump_stdin(io, r->ws);
    });
  }
  io->run();
  if (raw) raw->restore();
  return outcome(remotes, o.all_ranks);
}

}  // namespace ag::cli
