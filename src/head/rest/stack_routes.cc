#include "head/rest/stack_routes.h"

#include <nlohmann/json.hpp>

#include "head/exec/stack_taker.h"
#include "head/rest/route_helpers.h"

namespace ag::head {

using nlohmann::json;

void StackRoutes::take(const Call& call, net::Respond respond) {
  const Job* job = deps_.jobs.table.find(call.param("job"));
  if (!job) return respond(error_response(404, "no job with id '" + call.param("job") + "'"));
  if (job->state != JobState::kRunning || job->attempts.empty()) {
    return respond(error_response(409, "job " + job->id + " is " + to_string(job->state) +
                                           "; stacks are taken only from the tasks of a running job"));
  }
  const AttemptRecord& attempt = job->attempts.back();
  const int64_t gang = static_cast<int64_t>(attempt.tasks.size());
  std::optional<int64_t> only;
  if (auto it = call.req.query.find("task_index"); it != call.req.query.end()) {
    char* end = nullptr;
    const int64_t index = std::strtoll(it->second.c_str(), &end, 10);
    if (it->second.empty() || *end != '\0' || index < 0) {
      return respond(error_response(400, "task_index must be a whole number from 0 (the gang's first task)"));
    }
    if (index >= gang) {
      return respond(error_response(400, "task index " + std::to_string(index) + " is outside job " + job->id +
                                             "'s gang of " + std::to_string(gang) + " (0-" +
                                             std::to_string(gang - 1) + ")"));
    }
    only = index;
  }
  std::vector<StackTaker::Target> targets;
  for (const TaskRecord& task : attempt.tasks) {
    if (only && task.index != *only) continue;
    if (task.state != TaskState::kRunning) {
      if (only) {
        return respond(error_response(409, "task " + std::to_string(task.index) + " of job " + job->id + " is " +
                                               to_string(task.state) + ", not running"));
      }
      continue;
    }
    targets.push_back({{job->id, attempt.number, task.index}, task.node_id});
  }
  if (targets.empty()) {
    return respond(error_response(409, "no task of job " + job->id + " runs yet; try again once they do"));
  }
  const std::string who = call.who.name;
  deps_.stacks.take(targets, [this, who, respond, job_id = job->id,
                              attempt = attempt.number](std::vector<StackTaker::Stacks> taken) {
    json tasks = json::array();
    for (const auto& s : taken) {
      tasks.push_back({{"task_index", s.task.task_index}, {"node_id", s.node_id}, {"python", s.python},
                       {"stacks", s.text}, {"error", s.error.empty() ? json(nullptr) : json(s.error)}});
      deps_.jobs.controller.report_problem(job_id, StackTaker::event_text(s, who, job_id));
    }
    respond(json_response(200, {{"job_id", job_id}, {"attempt", attempt}, {"tasks", std::move(tasks)}}));
  });
}

}  // namespace ag::head
