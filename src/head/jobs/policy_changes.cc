#include "head/jobs/policy_changes.h"

#include <set>

namespace ag::head {

void PolicyChanges::in_turn(Done done, std::function<void(Done)> change) {
  turns_.take("policy", [done = std::move(done), change = std::move(change)](const Turns::Ended& ended) {
    change([done, ended](const Status& status) {
      done(status);
      ended();
    });
  });
}

void PolicyChanges::set_quota(bool group, const std::string& name, const sched::Limits& limits, Done done) {
  in_turn(std::move(done), [this, group, name, limits](Done ended) {
    auto change = u_.policy.set_quota(group, name, limits);
    u_.writer.write_then(
        std::move(change.batch),
        [this, apply = std::move(change.apply)] {
          apply();
          // Jobs over the old quota may fit the new one (and every pending reason is redone).
          u_.loop.request();
        },
        std::move(ended));
  });
}

void PolicyChanges::set_queue(const std::string& name, std::optional<QueueDef> queue, Done done) {
  in_turn(std::move(done), [this, name, queue = std::move(queue)](Done ended) mutable {
    if (!queue) {
      if (!u_.policy.queue(name)) {
        return ended(not_found("no queue '" + name + "'; `ag queue list` shows the queues"));
      }
      if (int using_it = u_.jobs.live_in_queue(name); using_it > 0) {
        return ended(Error{ErrorCode::kConflict, "queue " + name + " still has " + std::to_string(using_it) +
                                                     " pending or running job(s); stop them or let them end, then "
                                                     "remove it (nothing was changed)"});
      }
    }
    // A job names its queue at submit; the queue is looked up again at every pass, so the
    // change applies to the jobs already waiting in it (other nodes, other limits).
    auto change = u_.policy.set_queue(name, std::move(queue));
    u_.writer.write_then(
        std::move(change.batch),
        [this, apply = std::move(change.apply)] {
          apply();
          u_.loop.cluster_changed();
          u_.loop.request();
        },
        std::move(ended));
  });
}

void PolicyChanges::set_draining(const std::string& node_id, bool draining, Done done) {
  in_turn(std::move(done), [this, node_id, draining](Done ended) {
    if (!u_.nodes.find(node_id)) {
      return ended(not_found("no node with id '" + node_id + "'; list nodes with `ag list-nodes`"));
    }
    std::set<std::string> drained;
    auto batch = u_.nodes.drain_record(node_id, draining, &drained);
    u_.writer.write_then(
        std::move(batch),
        [this, drained, node_id, draining] {
          u_.nodes.set_drained(drained);
          // `ag resume` also clears an UNHEALTHY mark (a failing check marks it again).
          if (!draining && u_.nodes.clear_health(node_id, "resumed by an admin")) {
            u_.nodes.send(node_id, api::HealthCleared{});  // so that it does not bring it back
          }
          u_.loop.cluster_changed();
          u_.loop.request();
        },
        std::move(ended));
  });
}

}  // namespace ag::head
