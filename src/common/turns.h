// Turns: changes that must not overlap, run one after another in the order asked.
//
// A change that is worked out from state an earlier change is still writing would be
// worked out from what may never be: when the earlier write is refused and undone,
// the later one has stored (or undone) over it. Changes under the same key therefore
// take turns: each is started once the one before it has ended. Changes under other
// keys do not wait for it. Single-threaded (the io thread).
#pragma once

#include <deque>
#include <functional>
#include <string>
#include <unordered_map>

namespace ag {

class Turns {
 public:
  // What a change calls, once, when it has ended (stored, refused or failed).
  using Ended = std::function<void()>;
  using Change = std::function<void(Ended)>;

  // Runs `change` now if nothing under `key` is under way, else once all those asked
  // before it have ended. A change may end at once, inside this call.
  void take(const std::string& key, Change change);

  // Changes under way or waiting, all keys together.
  size_t pending() const;

 private:
  struct Line {
    std::deque<Change> waiting;
    bool under_way = false;
    bool running = false;  // run()'s loop is on this line
  };
  void run(const std::string& key);

  std::unordered_map<std::string, Line> lines_;  // only keys with a change under way or waiting
};

}  // namespace ag
