#include "head/rest/exec_routes.h"

#include <nlohmann/json.hpp>

#include "api/exec_protocol.h"
#include "head/rest/route_helpers.h"
#include "net/auth.h"

namespace ag::head {
namespace {

constexpr const char* kJobsPrefix = "/api/jobs/";
constexpr const char* kExecSuffix = "/exec";

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

bool ExecRoutes::is_exec_path(const std::string& path) {
  const std::string prefix = kJobsPrefix, suffix = kExecSuffix;
  return path.size() > prefix.size() + suffix.size() && path.rfind(prefix, 0) == 0 &&
         path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0 &&
         path.find('/', prefix.size()) == path.size() - suffix.size();
}

std::optional<net::HttpResponse> ExecRoutes::check(const net::HttpRequest& request) const {
  Target target;
  return resolve(request, &target);
}

void ExecRoutes::open(const std::shared_ptr<net::WsConnection>& client, const net::HttpRequest& request) {
  Target target;
  if (auto refused = resolve(request, &target)) {
    const std::string why = nlohmann::json::parse(refused->body, nullptr, false).value("error", refused->body);
    client->send(api::exec_frame(api::ExecChannel::kStatus, api::encode_exec_status({std::nullopt, std::nullopt, why})),
                 true);
    return client->close();
  }
  relay_.open(client, std::move(target.request), target.node_id);
}

std::optional<net::HttpResponse> ExecRoutes::resolve(const net::HttpRequest& request, Target* target) const {
  const std::string id = request.path.substr(std::string(kJobsPrefix).size(),
                                             request.path.size() - std::string(kJobsPrefix).size() -
                                                 std::string(kExecSuffix).size());
  const std::vector<std::string> command = net::query_values(request.target, "command");
  Principal who = deps_.access.authenticate_token(net::bearer_token(request));
  std::string action = "exec " + id;
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
  action = "exec " + job->id + " task " + std::to_string(index) + ": " + command_line(command);
  if (!may_act_on(deps_.access, who, *job)) return refuse(not_your_job(*job, "run commands in it"));
  if (Status s = api::check_exec_command(command); !s) return refuse(error_response(400, s.error().message));
  if (job->state != JobState::kRunning || job->attempts.empty()) {
    return refuse(error_response(409, "job " + job->id + " is " + to_string(job->state) +
                                          "; commands run only beside the tasks of a running job"));
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
  target->request.task = {job->id, attempt.number, static_cast<int>(index)};
  target->request.command = command;
  target->request.with_stdin = request.query.count("stdin") && request.query.at("stdin") == "1";
  target->node_id = task.node_id;
  deps_.audit.record({deps_.clock.now_ms(), who.name, request.remote_address, action, "ok"});
  return std::nullopt;
}

}  // namespace ag::head
