#include "worker/task_record.h"

#include <nlohmann/json.hpp>

namespace ag::worker {

std::string encode_task_record(const TaskRecord& r) {
  nlohmann::json state = {{"job_id", r.id.job_id},
                          {"attempt", r.id.attempt},
                          {"task_index", r.id.task_index},
                          {"marker", r.marker},
                          {"cgroup", r.cgroup},
                          {"limit_cgroups", r.limit_cgroups},
                          {"memory_limit_bytes", r.memory_limit_bytes},
                          {"container", r.container},
                          {"engine_path", r.engine_path},
                          {"cgroup_parent", r.cgroup_parent},
                          {"supervisor_pid", r.supervisor_pid},
                          {"pid", r.pid}};
  return state.dump() + "\n";
}

std::optional<TaskRecord> decode_task_record(std::string_view text) {
  auto state = nlohmann::json::parse(text, nullptr, false);
  if (!state.is_object()) return std::nullopt;
  try {
    TaskRecord r;
    r.id = {state.value("job_id", ""), state.value("attempt", 0), state.value("task_index", 0)};
    r.marker = state.value("marker", "");
    r.cgroup = state.value("cgroup", "");
    r.limit_cgroups = state.value("limit_cgroups", std::vector<std::string>{});
    r.memory_limit_bytes = state.value("memory_limit_bytes", int64_t{0});
    r.container = state.value("container", "");
    r.engine_path = state.value("engine_path", "");
    r.cgroup_parent = state.value("cgroup_parent", "");
    r.supervisor_pid = state.value("supervisor_pid", int64_t{0});
    r.pid = state.value("pid", int64_t{0});
    return r;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;  // a field of another type
  }
}

}  // namespace ag::worker
