#include "common/turns.h"

#include <memory>
#include <utility>

namespace ag {

void Turns::take(const std::string& key, Change change) {
  lines_[key].waiting.push_back(std::move(change));
  run(key);
}

size_t Turns::pending() const {
  size_t count = 0;
  for (const auto& [_, line] : lines_) count += line.waiting.size() + (line.under_way ? 1 : 0);
  return count;
}

void Turns::run(const std::string& key) {
  // References into an unordered_map stay valid while other keys come and go.
  Line& line = lines_.at(key);
  if (line.running) return;  // a change that ended at once: the loop below goes on
  line.running = true;
  // A loop, not a recursion: changes that end at once do not deepen the stack.
  while (!line.under_way && !line.waiting.empty()) {
    line.under_way = true;
    Change next = std::move(line.waiting.front());
    line.waiting.pop_front();
    auto ended_once = std::make_shared<bool>(false);
    next([this, key, ended_once] {
      if (*ended_once) return;
      *ended_once = true;
      lines_.at(key).under_way = false;
      run(key);
    });
  }
  line.running = false;
  if (!line.under_way && line.waiting.empty()) lines_.erase(key);
}

}  // namespace ag
