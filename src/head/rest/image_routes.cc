#include <nlohmann/json.hpp>

#include "api/container_spec.h"
#include "head/rest/image_routes.h"
#include "head/rest/route_helpers.h"

namespace ag::head {

using nlohmann::json;

namespace {

json pull_json(const ImagePulls::Pull& pull, const NodeRegistry& nodes) {
  json out = json::array();
  bool finished = true;
  for (const auto& n : pull.nodes) {
    std::string state = n.state, message = n.message;
    const Node* node = const_cast<NodeRegistry&>(nodes).find(n.node_id);
    if (state == "pulling" && (!node || node->state != NodeState::kAlive)) {
      state = "failed";
      message = "node " + n.node_id + " is not connected";
    }
    finished = finished && state != "pulling";
    out.push_back({{"node_id", n.node_id}, {"state", state}, {"message", message}});
  }
  return {{"pull_id", pull.id}, {"image", pull.image}, {"by", pull.by}, {"started_ms", pull.started_ms},
          {"finished", finished}, {"nodes", out}};
}

}  // namespace

void ImageRoutes::pull_status(const Call& call, net::Respond respond) {
  const ImagePulls::Pull* pull = deps_.pulls.find(call.param("pull"));
  if (!pull) {
    return respond(error_response(404, "no pull with id '" + call.param("pull") + "' (the head keeps the last " +
                                           std::to_string(ImagePulls::kKeptPulls) + " pulls while it runs)"));
  }
  respond(json_response(200, pull_json(*pull, deps_.nodes)));
}

void ImageRoutes::pull(const Call& call, net::Respond respond) {
  const net::HttpRequest& req = call.req;
  const Principal& who = call.who;
  json body = json::parse(req.body, nullptr, false);
  if (!body.is_object() || !body.contains("image") || !body["image"].is_string()) {
    return respond(error_response(400, "send {\"image\": \"REGISTRY/NAME:TAG\"} (and \"nodes\": [NODE_ID, ...] for "
                                       "some nodes only)"));
  }
  const std::string image = body["image"].get<std::string>();
  if (std::string problem = api::image_reference_problem(image); !problem.empty()) {
    return respond(error_response(400, "field 'image': '" + image.substr(0, 200) + "' " + problem));
  }
  std::vector<std::string> targets;
  if (body.contains("nodes") && !body["nodes"].is_null()) {
    if (!body["nodes"].is_array() || body["nodes"].empty()) {
      return respond(error_response(400, "field 'nodes': give a non-empty list of node ids, or leave it out for "
                                         "every node that runs containers"));
    }
    for (const auto& id : body["nodes"]) {
      if (!id.is_string()) return respond(error_response(400, "field 'nodes': node ids are strings"));
      const Node* node = deps_.nodes.find(id.get<std::string>());
      const std::string name = id.get<std::string>().substr(0, 100);
      if (!node) return respond(error_response(400, "field 'nodes': no node '" + name + "'; see `ag list-nodes`"));
      if (node->state != NodeState::kAlive) return respond(error_response(400, "node " + name + " is not alive"));
      if (node->container_engine.empty()) {
        return respond(error_response(400, "node " + name + " has no container engine; install podman (or docker) "
                                           "there and restart its worker"));
      }
      targets.push_back(node->node_id);
    }
  } else {
    for (const auto& [id, node] : deps_.nodes.nodes()) {
      if (node.state == NodeState::kAlive && !node.container_engine.empty()) targets.push_back(id);
    }
    if (targets.empty()) {
      return respond(error_response(400, "no alive node can run containers; install podman (or docker) on the "
                                         "workers and restart them"));
    }
  }
  const ImagePulls::Pull& pull = deps_.pulls.start(image, targets, who.name, deps_.clock.now_ms());
  for (const auto& id : targets) deps_.nodes.send(id, api::Pull{pull.id, image});
  respond(json_response(202, pull_json(pull, deps_.nodes)));
}

}  // namespace ag::head
