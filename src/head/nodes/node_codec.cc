#include "head/nodes/node_codec.h"

#include <nlohmann/json.hpp>

namespace ag::head {

using nlohmann::json;

json node_to_json(const Node& node, const Resources& allocated) {
  json health = json(nullptr);
  if (node.unhealthy) {
    health = {{"reason", node.unhealthy->reason},
              {"since_ms", node.unhealthy_since_ms},
              {"sticky", node.unhealthy->sticky}};
    if (!node.unhealthy->gpu_kind.empty()) {
      health["gpu_kind"] = node.unhealthy->gpu_kind;
      health["gpu_index"] = node.unhealthy->gpu_index;
    }
  }
  return {{"node_id", node.node_id},
          {"address", node.address},
          {"hostname", node.hostname},
          {"network_interface", node.network_interface},
          {"state", to_string(node.state)},
          {"draining", node.draining},
          {"healthy", !node.unhealthy},
          {"unhealthy", health},
          {"labels", node.labels},
          {"limits", node.limits},
          {"container_engine", node.container_engine},
          {"allowed_mounts", node.allowed_mounts},
          {"resources",
           {{"num_cpus", node.total.cpu_millis / 1000.0},
            {"memory_bytes", node.total.memory_bytes},
            {"num_gpus", node.total.gpus},
            {"gpu_ids", node.gpu_ids}}},
          {"allocated",
           {{"num_cpus", allocated.cpu_millis / 1000.0},
            {"memory_bytes", allocated.memory_bytes},
            {"num_gpus", allocated.gpus}}},
          {"busy_master_ports", node.busy_ports},
          {"registered_ms", node.registered_ms}};
}

json usage_to_json(const UsageSample& u) {
  json gpus = json::array();
  for (const auto& g : u.gpus) {
    gpus.push_back(
        {{"index", g.index}, {"utilization_percent", g.utilization_percent},
         {"memory_used_bytes", g.memory_used_bytes}, {"memory_total_bytes", g.memory_total_bytes}});
  }
  return {{"time_ms", u.time_ms},
          {"cpu_percent", u.cpu_percent},
          {"memory_used_bytes", u.memory_used_bytes},
          {"gpus", gpus}};
}

}  // namespace ag::head
