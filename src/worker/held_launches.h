// HeldLaunches: the launches a head sends before their placement is durable
// (api::Launch::hold). Each is made ready while the head writes the placement (its
// folders, groups, output file and request: TaskLauncher::prepare) and starts only on
// the head's api::ConfirmLaunch; the confirmation may come before the launch is ready
// (a package still unpacking), and whichever of the two comes second starts it.
//
//   hold --ready--> waits --confirm(start)--> started
//     \--confirm(start)--> confirmed --ready--> started
//   confirm(drop), a kill, the channel dropping --> dropped: what was made ready is undone
//
// A dropped launch never runs: a head that reconnects sends it whole again. Owner's (io)
// thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>

#include "api/protocol.h"
#include "common/result.h"
#include "worker/launch_preparer.h"
#include "worker/task_launcher.h"

namespace ag::worker {

class HeldLaunches {
 public:
  struct Deps {
    TaskLauncher& launcher;
    // Starts a confirmed task (TaskLauncher::launch takes what was made ready), or
    // reports why it could not be made ready.
    std::function<void(const api::TaskKey&, Result<LaunchSpec>)> start;
    // A launch that will not run: what its preparation kept (a package) can go.
    std::function<void(const api::TaskKey&)> release;
  };
  explicit HeldLaunches(Deps deps) : deps_(std::move(deps)) {}

  // The launch of `task` is held: the returned callback is where its preparation ends.
  LaunchPreparer::Ready hold(const api::TaskKey& task);
  // The head's word on a held launch: start it (now, or once ready) or drop it. False
  // when `task` is not held here.
  bool confirm(const api::TaskKey& task, bool start);
  bool holds(const api::TaskKey& task) const { return held_.count(task) > 0; }
  // Every held launch dropped (the channel to the head dropped; the node is fenced or
  // stops).
  void drop_all();

 private:
  struct Held {
    uint64_t serial = 0;
    bool confirmed = false;
    std::optional<Result<LaunchSpec>> ready;  // set once prepared (or refused)
  };
  void prepared(const api::TaskKey& task, uint64_t serial, Result<LaunchSpec> spec);
  void undo(const api::TaskKey& task, const Held& held);

  Deps deps_;
  std::map<api::TaskKey, Held> held_;
  uint64_t next_serial_ = 1;
};

}  // namespace ag::worker
