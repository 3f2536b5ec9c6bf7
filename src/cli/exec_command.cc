// `ag exec JOB [--task-index N] [-i] -- CMD...`: runs CMD beside a running task and
// passes its stdout and stderr here, each to its own stream; its exit code is ag's
// (128 + N for a signal N, as a shell reports it). With -i this process's input goes
// to the command's stdin. The wire is api/exec_protocol.h.
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <iostream>
#include <nlohmann/json.hpp>
#include <future>
#include <thread>

#include "api/exec_protocol.h"
#include "cli/api_client.h"
#include "cli/commands.h"
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

Error refusal(int status, const std::string& body) {
  const std::string message = nlohmann::json::parse(body, nullptr, false).value("error", body);
  const ErrorCode code = status == 400   ? ErrorCode::kInvalidArgument
                         : status == 401 ? ErrorCode::kUnauthenticated
                         : status == 403 ? ErrorCode::kPermissionDenied
                         : status == 404 ? ErrorCode::kNotFound
                         : status == 409 ? ErrorCode::kConflict
                                         : ErrorCode::kUnavailable;
  return {code, message.empty() ? "the head answered HTTP " + std::to_string(status) : message};
}

}  // namespace

int exec(const ConnectionOptions& options, const std::string& job_id, int task_index, bool with_stdin,
         const std::vector<std::string>& command) {
  if (command.empty()) return usage_error("give the command to run after `--`: ag exec " + job_id + " -- nvidia-smi");
  if (Status s = api::check_exec_command(command); !s) return usage_error(s.error().message);
  auto conn = resolve_connection(options);
  if (!conn.ok()) return fail(conn.error());
  net::WsDialOptions dial;
  dial.to = conn.value().endpoint;
  dial.target = "/api/jobs/" + net::url_encode(job_id) + "/exec?task_index=" + std::to_string(task_index);
  for (const auto& arg : command) dial.target += "&command=" + net::url_encode(arg);
  if (with_stdin) dial.target += "&stdin=1";
  dial.headers["Authorization"] = "Bearer " + conn.value().token;
  dial.timeout_ms = 30000;
  dial.refusal = refusal;

  // Shared with the input thread, which may outlive this call (blocked in read()).
  struct Shared {
    asio::io_context io;
    std::shared_ptr<net::WsConnection> ws;
  };
  auto shared = std::make_shared<Shared>();
  std::optional<Error> failed;
  std::optional<api::ExecStatus> ended;
  net::ws_dial(shared->io, dial, [&](Result<std::shared_ptr<net::WsConnection>> dialled) {
    if (!dialled.ok()) {
      failed = dialled.error();
      return;
    }
    shared->ws = dialled.value();
    shared->ws->start(
        [&](const std::string& data, bool binary) {
          if (!binary || data.empty()) return;
          const auto channel = static_cast<ExecChannel>(data[0]);
          if (channel == ExecChannel::kStdout) write_all(1, data.data() + 1, data.size() - 1);
          if (channel == ExecChannel::kStderr) write_all(2, data.data() + 1, data.size() - 1);
          if (channel == ExecChannel::kStatus) {
            auto status = api::decode_exec_status(std::string_view(data).substr(1));
            if (status.ok()) ended = status.value();
          }
        },
        [&](const std::string&) { shared->io.stop(); });
    if (!with_stdin) return;
    // Input is read on a thread of its own (a file, a pipe or a terminal alike) and
    // sent from the io thread, a chunk at a time while little is queued.
    std::thread([shared] {
      std::string chunk(api::kExecChunkBytes, '\0');
      for (;;) {
        const ssize_t n = ::read(0, chunk.data(), chunk.size());
        if (n < 0 && errno == EINTR) continue;
        auto sent = std::make_shared<std::promise<void>>();
        std::string frame =
            api::exec_frame(ExecChannel::kStdin, n > 0 ? std::string_view(chunk.data(), static_cast<size_t>(n)) : "");
        asio::post(shared->io, [shared, sent, frame = std::move(frame)]() mutable {
          shared->ws->send(std::move(frame), true);
          if (shared->ws->queued_bytes() <= api::kExecHighWaterBytes) return sent->set_value();
          shared->ws->on_drained(api::kExecHighWaterBytes / 2, [sent, once = std::make_shared<bool>(false)] {
            if (!*once) sent->set_value();
            *once = true;
          });
        });
        sent->get_future().wait();
        if (n <= 0) return;
      }
    }).detach();
  });
  shared->io.run();
  if (failed) return fail(*failed);
  if (!ended) return fail(Error{ErrorCode::kUnavailable, "the connection to the head closed before the command ended"});
  if (!ended->error.empty()) return fail(Error{ErrorCode::kConflict, ended->error});
  if (ended->signal) return 128 + *ended->signal;
  return ended->exit_code.value_or(1);
}

}  // namespace ag::cli
