// StackTaker: asks workers for the Python stacks of a job's tasks (`ag stack`, hang
// detection) and gathers their answers. One take names several tasks; each goes to its
// node as a StackRequest and comes back as a StackReport, matched by request id and
// node. A node that does not answer within kAnswerMs, or has no channel, is reported
// as such; the take's callback runs once, when every task has an answer. Io thread only.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "api/protocol.h"
#include "common/timers.h"
#include "head/nodes/worker_channel.h"

namespace ag::head {

class StackTaker {
 public:
  static constexpr int64_t kAnswerMs = 10000;
  // Requests waiting for an answer, all takes together; more are answered at once
  // with an error.
  static constexpr size_t kMaxWaiting = 4096;

  struct Target {
    api::TaskKey task;
    std::string node_id;
  };
  struct Stacks {
    api::TaskKey task;
    std::string node_id;
    bool python = false;
    std::string text;
    std::string error;  // "" when taken
  };
  using Done = std::function<void(std::vector<Stacks>)>;

  StackTaker(Timers& timers, WorkerChannel& channel) : timers_(timers), channel_(channel) {}
  ~StackTaker();
  StackTaker(const StackTaker&) = delete;
  StackTaker& operator=(const StackTaker&) = delete;

  // Answers in `targets`' order.
  void take(const std::vector<Target>& targets, Done done);
  // A worker's answer (WorkerGateway). Unknown, late or another node's: ignored.
  void on_report(const std::string& node_id, const api::StackReport& report);

  size_t waiting() const { return waiting_.size(); }

  // The job event that keeps one task's stacks (the first kEventBytes of them): "stacks
  // of task N (taken by WHO):" and the text, or why they could not be taken.
  static constexpr size_t kEventBytes = 16 << 10;
  static std::string event_text(const Stacks& stacks, const std::string& taken_by, const std::string& job_id);

 private:
  struct Take;
  struct Waiting {
    std::shared_ptr<Take> take;
    size_t slot = 0;
    Timers::Id timer = 0;
  };
  void answer(const std::string& request, bool python, std::string text, std::string error);

  Timers& timers_;
  WorkerChannel& channel_;
  std::map<std::string, Waiting> waiting_;  // by request id
};

}  // namespace ag::head
