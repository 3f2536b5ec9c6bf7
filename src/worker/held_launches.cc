#include "worker/held_launches.h"

#include <utility>

namespace ag::worker {

LaunchPreparer::Ready HeldLaunches::hold(const api::TaskKey& task) {
  const uint64_t serial = next_serial_++;
  Held& held = held_[task];
  if (held.serial != 0) undo(task, held);  // held twice: the first copy goes
  held = Held{serial, false, std::nullopt};
  return [this, serial](const api::TaskKey& id, Result<LaunchSpec> spec) { prepared(id, serial, std::move(spec)); };
}

void HeldLaunches::prepared(const api::TaskKey& task, uint64_t serial, Result<LaunchSpec> spec) {
  auto it = held_.find(task);
  if (it == held_.end() || it->second.serial != serial) {
    // Dropped while it was being made ready (a newer copy, if any, keeps its own).
    if (it == held_.end()) deps_.release(task);
    return;
  }
  if (spec.ok()) {
    if (Status s = deps_.launcher.prepare(spec.value()); !s) spec = s.error();
  }
  if (!it->second.confirmed) {
    it->second.ready = std::move(spec);
    return;
  }
  held_.erase(it);
  deps_.start(task, std::move(spec));
}

bool HeldLaunches::confirm(const api::TaskKey& task, bool start) {
  auto it = held_.find(task);
  if (it == held_.end()) return false;
  if (!start) {
    undo(task, it->second);
    held_.erase(it);
    return true;
  }
  if (!it->second.ready) {
    it->second.confirmed = true;
    return true;
  }
  Result<LaunchSpec> spec = std::move(*it->second.ready);
  held_.erase(it);
  deps_.start(task, std::move(spec));
  return true;
}

void HeldLaunches::undo(const api::TaskKey& task, const Held& held) {
  // One still being made ready is released when its preparation ends.
  if (!held.ready) return;
  if (held.ready->ok()) deps_.launcher.drop_prepared(task);
  deps_.release(task);
}

void HeldLaunches::drop_all() {
  for (const auto& [task, held] : held_) undo(task, held);
  held_.clear();
}

}  // namespace ag::worker
