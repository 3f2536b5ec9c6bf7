#include "head/jobs/job_layer.h"

#include "head/jobs/reconcile.h"

namespace ag::head {

JobLayer::JobLayer(Deps d, JobConfig config)
    : deps(d),
      cluster_events(d.clock),
      policy(d.store),
      usage(d.clock, d.timers, d.store, config.usage_half_life_ms),
      writer(d.clock, d.timers, d.store,
             JobWriter::Source{[this](const std::string& id) { return table.find(id); },
                               [this](const std::string& id) -> const std::vector<JobEvent>* {
                                 return table.find(id) ? &table.events(id) : nullptr;
                               },
                               [this](const std::string& id) { retention.forget(id); },
                               [this] { return cluster_events.appended_seq(); },
                               [this](int64_t seq) { cluster_events.stored_upto(seq); }}),
      loop(d.clock, d.timers, [this] { controller.run_pass(); }),
      gates(d.clock, d.timers, [this](const std::vector<std::string>& due) { controller.begin_times_came(due); }),
      dispatcher(
          TaskDispatcher::Deps{
              d.timers, d.workers, d.nodes, writer, [this](const std::string& id) { return table.find(id); },
              [this](const api::TaskKey& task, const api::TaskExit& exit) { controller.task_ended(task, exit); }},
          config.master_port_first, config.master_port_last, config.preempt_grace_ms),
      deadlines(d.clock, d.timers,
                [this](const std::string& id, const Deadline& deadline) { controller.deadline_passed(id, deadline); }),
      controller(JobController::Units{table, capacity, writer, loop, dispatcher, deadlines, gates, arrays, usage,
                                      events, cluster_events, policy, d.nodes, d.workers, d.logs, d.store, d.clock},
                 config),
      retention(JobRetention::Units{table, writer, gates, loop, arrays, d.logs, events}),
      changes(PolicyChanges::Units{policy, d.nodes, table, writer, loop}) {
  capacity.rebuild(d.nodes, table);
  node_watch_ =
      d.nodes.watch_changes([this](const std::string& id, const Node* node) { capacity.node_changed(id, node); });
}

JobLayer::~JobLayer() { deps.nodes.unwatch_changes(node_watch_); }

Status JobLayer::recover() {
  if (Status s = policy.recover(); !s) return s;
  if (Status s = usage.recover(); !s) return s;
  // Nodes an admin drained stay drained.
  if (Status s = deps.nodes.recover_drained(deps.store); !s) return s;
  return controller.recover();
}

std::map<uint64_t, int64_t> queue_positions(const JobLayer& layer) {
  std::map<uint64_t, int64_t> out;
  int64_t position = 0;
  layer.loop.queue().walk(layer.usage.usage_now(layer.policy.share_weights()), [&](const std::string& id) {
    out.emplace(layer.table.find(id)->queue_seq, ++position);
    return true;
  });
  return out;
}

std::vector<sched::ShareLine> share_report(const JobLayer& layer) {
  return layer.usage.report(layer.policy.share_weights());
}

uint64_t watch_job(JobLayer& layer, const std::string& job_id, std::function<void()> changed) {
  const Job* job = layer.table.find(job_id);
  if (!job || job->terminal()) {
    changed();
    return 0;
  }
  return layer.events.watch(job_id, std::move(changed));
}

Status may_report(const JobLayer& layer, const std::string& node_id, const api::TaskKey& task) {
  return check_reporter(layer.table.all(), node_id, task);
}

}  // namespace ag::head
