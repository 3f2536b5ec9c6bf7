#include "head/nodes/image_pulls.h"

#include "common/ids.h"

namespace ag::head {

bool ImagePulls::Pull::finished() const {
  for (const auto& n : nodes) {
    if (n.state == "pulling") return false;
  }
  return true;
}

const ImagePulls::Pull& ImagePulls::start(const std::string& image, const std::vector<std::string>& node_ids,
                                          const std::string& by, int64_t now_ms) {
  Pull pull;
  pull.id = "pull_" + random_hex(6);
  pull.image = image;
  pull.by = by;
  pull.started_ms = now_ms;
  for (const auto& id : node_ids) pull.nodes.push_back({id, "pulling", "waiting for the node"});
  pulls_.push_back(std::move(pull));
  while (pulls_.size() > kKeptPulls) pulls_.pop_front();
  return pulls_.back();
}

void ImagePulls::update(const std::string& node_id, const api::PullUpdate& update) {
  for (auto& pull : pulls_) {
    if (pull.id != update.pull_id) continue;
    for (auto& n : pull.nodes) {
      if (n.node_id != node_id || n.state != "pulling") continue;
      if (update.done) {
        n.state = update.error.empty() ? "done" : "failed";
        n.message = update.error.empty() ? "pulled" : update.error.substr(0, 1000);
      } else {
        n.message = update.text.substr(0, 300);
      }
    }
  }
}

const ImagePulls::Pull* ImagePulls::find(const std::string& id) const {
  for (const auto& pull : pulls_) {
    if (pull.id == id) return &pull;
  }
  return nullptr;
}

}  // namespace ag::head
