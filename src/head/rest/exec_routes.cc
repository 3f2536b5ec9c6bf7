#include "head/rest/exec_routes.h"

#include <nlohmann/json.hpp>

#include "api/exec_protocol.h"
#include "head/rest/route_helpers.h"
#include "net/auth.h"

namespace ag::head {
namespace {

constexpr const char* kJobsPrefix = "/api/jobs/";

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The route's suffix: "/exec" or "/port-forward", "" for neither.
std::string exec_suffix(const std::string& path) {
  for (const std::string suffix : {api::kExecSuffix, api::kPortForwardSuffix}) {
    const std::string prefix = kJobsPrefix;
    if (path.size() > prefix.size() + suffix.size() && path.rfind(prefix, 0) == 0 && ends_with(path, suffix) &&
        path.find('/', prefix.size()) == path.size() - suffix.size()) {
      return suffix;
    }
  }
  return "";
}

// The command line as the audit log shows it.
std::string command_line(const std::vector<std::string>& command) {
  std::string line;
  for (const auto& arg : command) {
    if (line.size() > 200) return line + " ...";
    line += (line.empty() ? "" : " ") + arg;
  }
  return line;
}

}  // namespace

struct ExecRoutes::Target {
  api::ExecOpen request;
  std::string node_id;
};

bool ExecRoutes::is_exec_path(const std::string& path) { return !exec_suffix(path).empty(); }

std::optional<net::HttpResponse> ExecRoutes::check(const net::HttpRequest& request) const {
  Target target;
  return resolve(request, &target, true);
}

net::HttpResponse ExecRoutes::without_upgrade(const net::HttpRequest& request) const {
  if (request.method != "GET") return error_response(405, "this route takes GET with a WebSocket upgrade");
  Target target;
  if (auto refused = resolve(request, &target, false)) return *refused;
  const bool forward = exec_suffix(request.path) == api::kPortForwardSuffix;
  return error_response(426, std::string("the route is there and would let you in, but it takes a WebSocket "
                                         "upgrade (RFC 6455); use ") +
                                 (forward ? "`ag port-forward`" : "`ag exec` or the SDK's job.exec"));
}

void ExecRoutes::open(const std::shared_ptr<net::WsConnection>& client, const net::HttpRequest& request) {
  Target target;
  if (auto refused = resolve(request, &target, false)) {
    const std::string why = nlohmann::json::parse(refused->body, nullptr, false).value("error", refused->body);
    client->send(api::exec_frame(api::ExecChannel::kStatus, api::encode_exec_status({std::nullopt, std::nullopt, why})),
                 true);
    return client->close();
  }
  relay_.open(client, std::move(target.request), target.node_id);
}

std::optional<net::HttpResponse> ExecRoutes::resolve(const net::HttpRequest& request, Target* target,
                                                     bool upgrading) const {
  const std::string suffix = exec_suffix(request.path);
  const bool forward = suffix == api::kPortForwardSuffix;
  const std::string verb = forward ? "port-forward " : "exec ";
  const std::string id = request.path.substr(std::string(kJobsPrefix).size(),
                                             request.path.size() - std::string(kJobsPrefix).size() - suffix.size());
  const std::vector<std::string> command = net::query_values(request.target, "command");
  Principal who = deps_.access.authenticate_token(net::bearer_token(request));
  std::string action = verb + id;
  auto refuse = [&](net::HttpResponse response) -> std::optional<net::HttpResponse> {
    // A stranger's refusals are only logged, never flood the audit log.
    if (who.kind != Principal::Kind::kNone) {
      deps_.audit.record({deps_.clock.now_ms(), who.name, request.remote_address, action, response.body});
    }
    return response;
  };
  if (who.kind == Principal::Kind::kNone) return refuse(error_response(401, "the head refused the token: " + who.refusal));
  if (!who.is_user()) return refuse(error_response(403, "exec is for users' tokens, not a node's or a join token"));
  const Job* job = deps_.jobs.table.find(id);
  if (!job) job = deps_.jobs.table.find_submission(who.name, id);
  if (!job) return refuse(error_response(404, "no job with id '" + id + "'; list jobs with `ag list-jobs`"));
  int64_t index = 0;
  if (auto it = request.query.find("task_index"); it != request.query.end()) {
    char* end = nullptr;
    index = std::strtoll(it->second.c_str(), &end, 10);
    if (it->second.empty() || *end != '\0' || index < 0 || index > api::kMaxTaskIndex) {
      return refuse(error_response(400, "task_index must be a whole number from 0 (the gang's first task)"));
    }
  }
  int64_t port = 0;
  if (forward) {
    auto it = request.query.find("port");
    char* end = nullptr;
    if (it != request.query.end()) port = std::strtoll(it->second.c_str(), &end, 10);
    if (it == request.query.end() || it->second.empty() || *end != '\0' || port < 1 || port > 65535) {
      return refuse(error_response(400, "port must be a TCP port from 1 to 65535 (the one the program listens on "
                                        "at the task's node)"));
    }
  }
  action = verb + job->id + " task " + std::to_string(index) + ": " +
           (forward ? "port " + std::to_string(port) : command_line(command));
  if (!may_act_on(deps_.access, who, *job)) {
    return refuse(not_your_job(*job, forward ? "reach its ports" : "run commands in it"));
  }
  if (!forward) {
    if (Status s = api::check_exec_command(command); !s) return refuse(error_response(400, s.error().message));
  }
  if (job->state != JobState::kRunning || job->attempts.empty()) {
    return refuse(error_response(409, "job " + job->id + " is " + to_string(job->state) +
                                          (forward ? "; ports are forwarded only to the tasks of a running job"
                                                   : "; commands run only beside the tasks of a running job")));
  }
  const AttemptRecord& attempt = job->attempts.back();
  if (index >= static_cast<int64_t>(attempt.tasks.size())) {
    return refuse(error_response(400, "task index " + std::to_string(index) + " is outside job " + job->id +
                                          "'s gang of " + std::to_string(attempt.tasks.size()) + " (0-" +
                                          std::to_string(attempt.tasks.size() - 1) + ")"));
  }
  const TaskRecord& task = attempt.tasks[static_cast<size_t>(index)];
  if (task.state != TaskState::kRunning) {
    return refuse(error_response(409, "task " + std::to_string(index) + " of job " + job->id + " is " +
                                          to_string(task.state) + ", not running"));
  }
  const Node* node = deps_.nodes.find(task.node_id);
  if (!node || !node->channel) {
    return refuse(error_response(503, "node " + task.node_id + " (task " + std::to_string(index) +
                                          "'s) is not connected to the head; try again once it is back"));
  }
  if (auto busy = relay_.refuse_new()) return refuse(*busy);
  const auto flag = [&](const char* name) { return request.query.count(name) && request.query.at(name) == "1"; };
  api::ExecOpen& open = target->request;
  open.task = {job->id, attempt.number, static_cast<int>(index)};
  open.command = command;
  open.port = static_cast<int>(port);
  open.with_stdin = flag("stdin");
  if (flag("tty") && !forward) {
    const auto query = [&](const char* name) { return request.query.count(name) ? request.query.at(name) : ""; };
    auto size = api::decode_terminal_size(query("rows") + " " + query("cols"));
    if (!size.ok()) return refuse(error_response(400, size.error().message));
    const std::string term = query("term");
    if (term.size() > 64 || term.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-+._") !=
                                std::string::npos) {
      return refuse(error_response(400, "term must be a terminal type such as xterm-256color (letters, digits, - + . _)"));
    }
    open.tty = true;
    open.rows = size.value().rows;
    open.cols = size.value().cols;
    open.term = term;
  }
  target->node_id = task.node_id;
  // The upgrade is what runs something; a plain request only asks whether it would.
  if (upgrading) deps_.audit.record({deps_.clock.now_ms(), who.name, request.remote_address, action, "ok"});
  return std::nullopt;
}

}  // namespace ag::head
