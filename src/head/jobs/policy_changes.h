// PolicyChanges: an admin's changes to what scheduling weighs: quotas, queues and node
// drains. Each is stored first (through the JobWriter, so it is ordered with job
// writes), then applied to PolicyStore or NodeRegistry, then a scheduling pass weighs
// the queue again (jobs set aside may fit now). Nothing changes when the store refuses.
// Each record holds a whole table (every quota, every queue, every drained node), so the
// changes take turns: one is worked out only once the one before it has been stored or
// refused, never from a policy that a change still being written will replace (two
// drains sent at once would otherwise each store a list without the other's node, and
// the second to land would undo the first while both were told they had worked). It
// owns no state but the changes waiting their turn. Io thread only.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "common/result.h"
#include "common/turns.h"
#include "head/jobs/job_table.h"
#include "head/jobs/job_writer.h"
#include "head/jobs/scheduling_loop.h"
#include "head/nodes/node_registry.h"
#include "head/scheduler/quotas.h"
#include "head/sharing/policy_store.h"

namespace ag::head {

class PolicyChanges {
 public:
  struct Units {
    PolicyStore& policy;
    NodeRegistry& nodes;
    const JobTable& jobs;
    JobWriter& writer;
    SchedulingLoop& loop;
  };
  explicit PolicyChanges(Units units) : u_(units) {}

  // Sets a user's (or group's) limits, or removes them when none is set.
  // Errors: the store's.
  void set_quota(bool group, const std::string& name, const sched::Limits& limits, std::function<void(Status)> done);
  // Sets (or, with nullopt, removes) a queue. Errors: kNotFound, kConflict (jobs still
  // use it), the store's.
  void set_queue(const std::string& name, std::optional<QueueDef> queue, std::function<void(Status)> done);
  // Drains a node (no new tasks; those running finish) or resumes it; it holds across
  // head restarts. Errors: kNotFound; the store's.
  void set_draining(const std::string& node_id, bool draining, std::function<void(Status)> done);

 private:
  using Done = std::function<void(Status)>;
  // Runs `change` once every change before it has ended; it is given the `done` to call
  // when it has ended (stored or refused), which calls the caller's and starts the next.
  void in_turn(Done done, std::function<void(Done)> change);

  Units u_;
  Turns turns_;  // one line: every policy change waits for the one before it
};

}  // namespace ag::head
