// Pre-pulls of a container image on the cluster's nodes (`ag pull IMAGE`,
// POST /api/images/pull): the head asks each node to pull (api::Pull), the nodes
// report progress and their end (api::PullUpdate), and callers read the state of each
// node's pull. In memory only: a pull is an operation to watch, not a record to keep
// (the last kKeptPulls are kept).
//
//   start(image, nodes) -> a pull id   update(node, PullUpdate)   find(id)
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "api/protocol.h"

namespace ag::head {

class ImagePulls {
 public:
  static constexpr size_t kKeptPulls = 64;

  struct NodePull {
    std::string node_id;
    // pulling | done | failed (a node that left while pulling is shown failed by the
    // route, which knows the nodes)
    std::string state = "pulling";
    std::string message;            // the latest progress, or why it failed
  };
  struct Pull {
    std::string id;
    std::string image;
    std::string by;
    int64_t started_ms = 0;
    std::vector<NodePull> nodes;
    bool finished() const;
  };

  // A new pull of `image` on `node_ids`; the caller sends each node its api::Pull.
  const Pull& start(const std::string& image, const std::vector<std::string>& node_ids, const std::string& by,
                    int64_t now_ms);
  // What node `node_id` said about one of its pulls (unknown pulls are ignored).
  void update(const std::string& node_id, const api::PullUpdate& update);
  const Pull* find(const std::string& id) const;

 private:
  std::deque<Pull> pulls_;  // oldest first
};

}  // namespace ag::head
