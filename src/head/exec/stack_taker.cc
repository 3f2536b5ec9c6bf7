#include "head/exec/stack_taker.h"

#include "common/ids.h"

namespace ag::head {

struct StackTaker::Take {
  std::vector<Stacks> stacks;
  size_t left = 0;
  Done done;
};

StackTaker::~StackTaker() {
  for (const auto& [request, w] : waiting_) timers_.cancel(w.timer);
}

void StackTaker::take(const std::vector<Target>& targets, Done done) {
  auto take = std::make_shared<Take>();
  take->done = std::move(done);
  take->left = targets.size();
  std::vector<std::string> requests;
  for (const auto& target : targets) {
    take->stacks.push_back({target.task, target.node_id, false, "", ""});
    requests.push_back("stack_" + random_hex(12));
  }
  if (targets.empty()) return take->done({});
  for (size_t slot = 0; slot < targets.size(); ++slot) {
    const std::string& request = requests[slot];
    waiting_[request] = {take, slot, 0};
    const std::string& node = targets[slot].node_id;
    if (waiting_.size() > kMaxWaiting) {
      answer(request, false, "", "the head is already waiting for " + std::to_string(kMaxWaiting) +
                                     " stack requests; try again in a few seconds");
    } else if (!channel_.send(node, api::StackRequest{request, targets[slot].task})) {
      answer(request, false, "", "node " + node + " is not connected to the head; try again once it is back");
    } else {
      waiting_[request].timer = timers_.start(kAnswerMs, [this, request, node] {
        auto it = waiting_.find(request);
        if (it == waiting_.end()) return;
        it->second.timer = 0;
        answer(request, false, "", "node " + node + " did not answer within " + std::to_string(kAnswerMs / 1000) + " s");
      });
    }
  }
}

std::string StackTaker::event_text(const Stacks& stacks, const std::string& taken_by, const std::string& job_id) {
  std::string event = "stacks of task " + std::to_string(stacks.task.task_index) + " (taken by " + taken_by + ")";
  event += stacks.error.empty() ? ":\n" + stacks.text : " could not be taken: " + stacks.error;
  if (event.size() > kEventBytes) event = event.substr(0, kEventBytes) + "\n... (the rest: ag stack " + job_id + ")";
  return event;
}

void StackTaker::on_report(const std::string& node_id, const api::StackReport& report) {
  auto it = waiting_.find(report.request);
  if (it == waiting_.end()) return;
  const Stacks& asked = it->second.take->stacks[it->second.slot];
  if (asked.node_id != node_id || asked.task != report.task) return;
  answer(report.request, report.python, report.text, report.error);
}

void StackTaker::answer(const std::string& request, bool python, std::string text, std::string error) {
  auto it = waiting_.find(request);
  if (it == waiting_.end()) return;
  Waiting w = std::move(it->second);
  waiting_.erase(it);
  if (w.timer) timers_.cancel(w.timer);
  Stacks& stacks = w.take->stacks[w.slot];
  stacks.python = python;
  stacks.text = std::move(text);
  stacks.error = std::move(error);
  if (--w.take->left == 0) w.take->done(std::move(w.take->stacks));
}

}  // namespace ag::head
