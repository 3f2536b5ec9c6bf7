// `ag stack JOB [--task-index N]`: the Python stacks of every thread of every process of
// the job's running tasks (or task N's), each rank under its own header; a rank that is
// not Python shows its process tree. The head keeps them in the job's events too.
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/api_client.h"
#include "cli/commands.h"

namespace ag::cli {

int stack(const ConnectionOptions& options, const std::string& job_id, std::optional<int> task_index) {
  auto conn = resolve_connection(options);
  if (!conn.ok()) return fail(conn.error());
  std::string target = "/api/jobs/" + net::url_encode(job_id) + "/stacks";
  if (task_index) target += "?task_index=" + std::to_string(*task_index);
  auto answer = call_json(conn.value(), "POST", target);
  if (!answer.ok()) return fail(answer.error());
  if (options.output == "json") {
    std::cout << answer.value().dump(2) << "\n";
    return 0;
  }
  int code = 0;
  for (const auto& task : answer.value().value("tasks", nlohmann::json::array())) {
    const std::string rank = std::to_string(task.value("task_index", 0));
    const std::string node = task.value("node_id", "");
    if (task.contains("error") && task["error"].is_string()) {
      std::cout << "=== rank " << rank << " (node " << node << "): not taken: " << task["error"].get<std::string>()
                << "\n\n";
      code = 1;
      continue;
    }
    std::cout << "=== rank " << rank << " (node " << node << ")"
              << (task.value("python", false) ? "" : ": no Python stacks") << " ===\n"
              << task.value("stacks", "") << "\n";
  }
  std::cout.flush();
  return code;
}

}  // namespace ag::cli
