// TaskDispatcher: what the head sends workers about tasks, and the master ports gangs
// use.
//
//   placement --launch_when_stored--> the placed jobs written at once (JobWriter), all
//       those of one pass in one write posted right after it --> stored: each task
//       still starting where it was placed is launched (a head restarted after a task
//       began knows its attempt; ADR 0001); not stored: the launches wait for the next
//       batch, which is retried until it is
//   a placement stored already (with its job's submit) --launch--> sent at once
//   a node re-registers --relaunch--> its starting tasks again, unless their placement
//       is still being stored (they go then)
//   a launch the node cannot take (gone meanwhile) --> start_failed, from the io queue
//   kill --> sent as it is (an unreachable node is told again when it re-registers)
//
// A master port is one of the range no live attempt holds and task 0's node does not
// report busy. Io thread only.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "api/protocol.h"
#include "common/timers.h"
#include "head/jobs/job.h"
#include "head/jobs/job_state_machine.h"
#include "head/jobs/job_writer.h"
#include "head/jobs/master_ports.h"
#include "head/nodes/node_registry.h"
#include "head/nodes/worker_channel.h"

namespace ag::head {

class TaskDispatcher {
 public:
  struct Deps {
    Timers& timers;
    WorkerChannel& workers;
    NodeRegistry& nodes;
    JobWriter& writer;
    std::function<const Job*(const std::string& job_id)> job;  // as it stands, null once gone
    // A launch its node could not take: the task never started.
    std::function<void(const api::TaskKey& task, const api::TaskExit& exit)> start_failed;
  };
  TaskDispatcher(Deps deps, int master_port_first, int master_port_last, int64_t preempt_grace_ms);
  ~TaskDispatcher() { *alive_ = false; }
  TaskDispatcher(const TaskDispatcher&) = delete;
  TaskDispatcher& operator=(const TaskDispatcher&) = delete;

  // The launches of a new placement of `job`, once it is stored.
  void launch_when_stored(const Job& job, const std::vector<TaskRef>& refs);
  // The launches of a placement that is durable already.
  void launch(const Job& job, const std::vector<TaskRef>& refs);
  // A starting task again (its node re-registered without it).
  void relaunch(const Job& job, const TaskRef& ref);
  void kill(const TaskRef& ref, int64_t grace_ms);

  int allocate_master_port(const std::string& node_id);
  void take_master_port(const std::string& node_id, int port) { master_ports_.take(node_id, port); }
  void release_master_port(const std::string& node_id, int port) { master_ports_.release(node_id, port); }

 private:
  struct Placed {
    std::string job_id;
    std::vector<TaskRef> refs;
  };
  // Writes every job placed since the last write, then launches their tasks.
  void store_placements();
  void launch_stored(const Placed& placed);
  void send_launch(const Job& job, const TaskRef& ref);

  Deps deps_;
  MasterPorts master_ports_;
  int64_t preempt_grace_ms_;
  struct TaskKeyHash {
    size_t operator()(const api::TaskKey& key) const {
      return std::hash<std::string>()(key.job_id) ^ (static_cast<size_t>(key.attempt) << 20) ^
             static_cast<size_t>(key.task_index);
    }
  };
  // Placed tasks whose launch waits for their placement to be stored (a node that
  // re-registers meanwhile is not sent them twice); by hash, looked up at every launch.
  std::unordered_set<api::TaskKey, TaskKeyHash> unstored_launches_;
  std::vector<Placed> placed_;  // waiting for the write posted for them
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ag::head
