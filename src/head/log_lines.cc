#include "head/log_lines.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <tuple>

namespace ag::head {

nlohmann::json merge_lines(const std::vector<TaskLinePage>& pages, int64_t tail) {
  struct Ref {
    int64_t time_ms;
    int task_index;
    int64_t offset;
    const std::string* text;
  };
  std::vector<Ref> refs;
  nlohmann::json next = nlohmann::json::array();
  bool truncated = false;
  for (const auto& [task_index, page] : pages) {
    for (const auto& line : page.lines) refs.push_back({line.time_ms, task_index, line.offset, &line.text});
    next.push_back(page.next);
    truncated = truncated || page.truncated;
  }
  std::stable_sort(refs.begin(), refs.end(), [](const Ref& a, const Ref& b) {
    return std::tie(a.time_ms, a.task_index, a.offset) < std::tie(b.time_ms, b.task_index, b.offset);
  });
  const size_t first = tail > 0 && refs.size() > static_cast<size_t>(tail) ? refs.size() - static_cast<size_t>(tail) : 0;
  nlohmann::json lines = nlohmann::json::array();
  for (size_t i = first; i < refs.size(); ++i) lines.push_back({refs[i].task_index, refs[i].time_ms, *refs[i].text});
  return {{"lines", std::move(lines)}, {"next", std::move(next)}, {"truncated", truncated}};
}

}  // namespace ag::head
