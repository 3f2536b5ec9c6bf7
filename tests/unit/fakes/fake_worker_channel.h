// FakeWorkerChannel: a head::WorkerChannel that records what the job layer sends
// to each node, and that can treat a node as unreachable.
#pragma once

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "head/nodes/worker_channel.h"

namespace ag::testing {

class FakeWorkerChannel final : public head::WorkerChannel {
 public:
  bool send(const std::string& node_id, api::HeadMessage message) override {
    if (unreachable.count(node_id)) return false;
    sent.emplace_back(node_id, std::move(message));
    return true;
  }

  // The messages of type M sent so far (to any node), in order, and forgets them.
  template <typename M>
  std::vector<std::pair<std::string, M>> take() {
    std::vector<std::pair<std::string, M>> out;
    std::vector<std::pair<std::string, api::HeadMessage>> rest;
    for (auto& [node, message] : sent) {
      if (auto* m = std::get_if<M>(&message)) {
        out.emplace_back(node, *m);
      } else {
        rest.emplace_back(node, std::move(message));
      }
    }
    sent = std::move(rest);
    return out;
  }

  std::vector<std::pair<std::string, api::HeadMessage>> sent;
  std::set<std::string> unreachable;
};

}  // namespace ag::testing
