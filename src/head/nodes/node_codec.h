// Nodes as JSON: the form GET /api/nodes answers and the dashboard's live stream
// pushes, kept in one place so both always agree.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "common/resources.h"
#include "head/nodes/node_registry.h"

namespace ag::head {

// The node with its capacity and what live tasks hold on it (`allocated`).
nlohmann::json node_to_json(const Node& node, const Resources& allocated);

// {time_ms, cpu_percent, memory_used_bytes, gpus: [{index, utilization_percent,
// memory_used_bytes, memory_total_bytes}]}
nlohmann::json usage_to_json(const UsageSample& sample);

}  // namespace ag::head
