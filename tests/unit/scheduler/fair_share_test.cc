// Fair share (fair_share.h): decayed usage, the queue's order, and a simulated week in
// which users with endless backlogs each get their share of the GPUs within 5%.
#include "head/scheduler/fair_share.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "head/scheduler/scheduler.h"
#include "scheduler/scheduler_fixtures.h"

namespace ag::sched {
namespace {

constexpr int64_t kHour = 3600 * 1000;
constexpr int64_t kDay = 24 * kHour;

std::vector<std::string> order(const PendingQueue& queue, const std::map<std::string, double>& usage) {
  std::vector<std::string> out;
  queue.walk([&](const std::string& owner) { return usage.count(owner) ? usage.at(owner) : 0.0; },
             [&](const std::string& id) {
               out.push_back(id);
               return true;
             });
  return out;
}

TEST(FairShareTest, UsageHalvesEveryHalfLife) {
  const UsageRecord record{100, 0};
  EXPECT_DOUBLE_EQ(decayed(record, 7 * kDay, 7 * kDay), 50);
  EXPECT_DOUBLE_EQ(decayed(record, 14 * kDay, 7 * kDay), 25);
  const UsageRecord more = charged(record, 10, 7 * kDay, 7 * kDay);
  EXPECT_DOUBLE_EQ(more.units, 60);
  EXPECT_EQ(more.at_ms, 7 * kDay);
  EXPECT_DOUBLE_EQ(billing_rate({16'000, 0, 2}), 3);  // 2 GPUs and 16 CPUs
}

TEST(FairShareTest, PriorityFirstThenTheLeastUsedOwnerThenSubmitOrder) {
  PendingQueue queue;
  queue.add({"alice", 0, 1, "a1"});
  queue.add({"alice", 0, 2, "a2"});
  queue.add({"bob", 0, 3, "b1"});
  queue.add({"carol", 100, 4, "c1"});
  queue.add({"bob", 0, 5, "b2"});
  EXPECT_EQ(queue.size(), 5u);
  // Nobody used anything: submit order within a priority.
  EXPECT_EQ(order(queue, {}), (std::vector<std::string>{"c1", "a1", "a2", "b1", "b2"}));
  // Alice used more lately: bob's jobs go before hers; carol's priority still wins.
  EXPECT_EQ(order(queue, {{"alice", 10}, {"bob", 1}}), (std::vector<std::string>{"c1", "b1", "b2", "a1", "a2"}));
  queue.remove({"bob", 0, 3, "b1"});
  queue.remove({"bob", 0, 3, "b1"});  // twice changes nothing
  EXPECT_EQ(queue.size(), 4u);
  EXPECT_EQ(order(queue, {{"alice", 10}}), (std::vector<std::string>{"c1", "b2", "a1", "a2"}));
  EXPECT_EQ(queue.owners(), (std::vector<std::string>{"alice", "bob", "carol"}));
}

TEST(FairShareTest, TheQueueCountsWhatItsJobsAskOfTheirNodesEachKindOnce) {
  PendingQueue queue;
  NodeNeeds a100;
  a100.labels["gpu"] = "a100";
  NodeNeeds in_image;
  in_image.containers = true;
  in_image.mounts = {"/data"};
  NodeNeeds in_queue;
  in_queue.queue = "night";
  queue.add({"alice", 0, 1, "a1", {}, a100});
  queue.add({"bob", 0, 2, "b1", {}, a100});
  queue.add({"bob", 0, 3, "b2", {}, in_image});
  queue.add({"carol", 0, 4, "c1", {}, in_queue});
  queue.add({"carol", 0, 5, "c2", {}, {}});
  queue.add({"carol", 0, 5, "c2", {}, {}});  // twice counts once
  EXPECT_EQ(queue.node_needs(),
            (std::map<NodeNeeds, size_t>{{a100, 2}, {in_image, 1}, {in_queue, 1}, {NodeNeeds{}, 1}}));
  queue.remove({"alice", 0, 1, "a1", {}, a100});
  queue.remove({"bob", 0, 3, "b2", {}, in_image});
  queue.remove({"bob", 0, 3, "b2", {}, in_image});  // twice changes nothing
  EXPECT_EQ(queue.node_needs(), (std::map<NodeNeeds, size_t>{{a100, 1}, {in_queue, 1}, {NodeNeeds{}, 1}}));
}

TEST(FairShareTest, ShareReportGivesEachUserTheirPartAndFactor) {
  const auto lines = share_report({{"alice", {300, 0}}, {"bob", {100, 0}}}, 0, 7 * kDay);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_DOUBLE_EQ(lines[0].usage_part, 0.75);
  EXPECT_DOUBLE_EQ(lines[0].share, 0.5);
  EXPECT_DOUBLE_EQ(lines[0].factor, std::exp2(-1.5));  // one and a half shares used
  EXPECT_DOUBLE_EQ(lines[1].factor, std::exp2(-0.5));
}

// Three users keep 200 one-GPU jobs each queued on a 24-GPU cluster for a simulated
// week; one of them submits hour-long jobs, the others ten-minute ones, and the third
// arrives a day late (and is let catch up: the others used the cluster without it).
// The queue orders owners by their usage divided by their share weight (as the head
// does). Returns each user's part of the GPU time over the last three days, and the
// longest any job waited.
std::map<std::string, double> simulate_week(const std::map<std::string, double>& weight, int64_t& longest_wait) {
  constexpr int64_t kStep = 5 * 60 * 1000;  // the simulation's tick
  std::vector<NodeView> nodes;
  for (int i = 0; i < 3; ++i) nodes.push_back(testing::make_node("n" + std::to_string(i), 64, 8));
  const std::map<std::string, int64_t> duration{{"u_long", kHour}, {"u_short", 10 * 60 * 1000}, {"u_late", 10 * 60 * 1000}};
  std::map<std::string, UsageRecord> usage;
  std::map<std::string, double> gpu_ms_late;  // GPU time used in days 4 to 7
  PendingQueue queue;
  std::map<std::string, PendingJob> jobs;
  std::map<std::string, std::string> owner_of;  // queued jobs
  std::map<std::string, uint64_t> seq_of;
  struct Running {
    std::string id;
    JobPlacement placement;
    int64_t ends_at = 0;
  };
  std::vector<Running> running;
  uint64_t seq = 0;
  longest_wait = 0;
  std::map<std::string, int64_t> queued_at;
  for (int64_t now = 0; now < 7 * kDay; now += kStep) {
    // Keep each present user's backlog full.
    std::map<std::string, int> backlog;
    for (const auto& [id, owner] : owner_of) ++backlog[owner];
    for (const auto& [user, _] : duration) {
      if (user == "u_late" && now < kDay) continue;
      for (int k = backlog[user]; k < 200; ++k) {
        const std::string id = user + "-" + std::to_string(seq);
        PendingJob job = testing::make_job(id, 1, 1, 1);
        job.owner = user;
        jobs[id] = job;
        owner_of[id] = user;
        queued_at[id] = now;
        seq_of[id] = seq;
        queue.add({user, 0, seq++, id});
      }
    }
    // End what is due; charge what ran during the tick.
    std::erase_if(running, [&](const Running& r) {
      if (r.ends_at > now) return false;
      for (auto& node : nodes) {
        if (node.node_id != r.placement.tasks[0].node_id) continue;
        node.free.gpus += 1;
        node.free.cpu_millis += 1000;
        node.free_gpu_ids.push_back(r.placement.tasks[0].gpu_ids[0]);
      }
      return true;
    });
    for (const auto& r : running) {
      const std::string& owner = jobs[r.id].owner;
      usage[owner] = charged(usage[owner], static_cast<double>(kStep) / 1000.0, now, 7 * kDay);
      if (now >= 4 * kDay) gpu_ms_late[owner] += static_cast<double>(kStep);
    }
    // One pass over the first jobs in queue order.
    std::vector<PendingJob> window;
    queue.walk([&](const std::string& owner) {
                 return usage.count(owner) ? decayed(usage[owner], now, 7 * kDay) / weight.at(owner) : 0.0;
               },
               [&](const std::string& id) {
                 window.push_back(jobs[id]);
                 return window.size() < 64;
               });
    const Plan plan = schedule(nodes, window);
    for (const auto& placement : plan.placements) {
      const PendingJob& job = jobs[placement.job_id];
      for (auto& node : nodes) {
        if (node.node_id != placement.tasks[0].node_id) continue;
        node.free.gpus -= 1;
        node.free.cpu_millis -= 1000;
        std::erase(node.free_gpu_ids, placement.tasks[0].gpu_ids[0]);
      }
      longest_wait = std::max(longest_wait, now - queued_at[job.job_id]);
      running.push_back({job.job_id, placement, now + duration.at(job.owner)});
      queue.remove({job.owner, 0, seq_of.at(job.job_id), job.job_id});
      owner_of.erase(job.job_id);
    }
  }
  double total = 0;
  for (const auto& [_, ms] : gpu_ms_late) total += ms;
  std::map<std::string, double> parts;
  for (const auto& [user, ms] : gpu_ms_late) parts[user] = total > 0 ? ms / total : 0;
  return parts;
}

// Equal shares: each holds a third of the GPU time within 5%, and nobody waits forever.
TEST(FairShareTest, ASimulatedWeekGivesEachBusyUserTheirShare) {
  int64_t longest_wait = 0;
  const auto parts = simulate_week({{"u_long", 1}, {"u_short", 1}, {"u_late", 1}}, longest_wait);
  ASSERT_EQ(parts.size(), 3u);
  for (const auto& [user, part] : parts) EXPECT_NEAR(part, 1.0 / 3, 0.05) << user;
  // 200 jobs each, a third of 24 GPUs for a user: a job waits about a day (more while
  // the late user catches up), never the week.
  EXPECT_LT(longest_wait, 3 * kDay);
}

// Configured shares (`ag quota set --user u_long --share 2`): 2:1:1 gives a half and two
// quarters, within 5%.
TEST(FairShareTest, ASimulatedWeekConvergesToConfiguredShares) {
  int64_t longest_wait = 0;
  const auto parts = simulate_week({{"u_long", 2}, {"u_short", 1}, {"u_late", 1}}, longest_wait);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_NEAR(parts.at("u_long"), 0.5, 0.05);
  EXPECT_NEAR(parts.at("u_short"), 0.25, 0.05);
  EXPECT_NEAR(parts.at("u_late"), 0.25, 0.05);
  EXPECT_LT(longest_wait, 4 * kDay);
}

TEST(FairShareTest, AShareWeightScalesTheUsersShareInTheReport) {
  const auto lines = share_report({{"alice", {300, 0}}, {"bob", {100, 0}}}, 0, 7 * kDay, {{"alice", 3}});
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_DOUBLE_EQ(lines[0].share, 0.75);  // 3 of 4
  EXPECT_DOUBLE_EQ(lines[0].factor, std::exp2(-1.0));  // she used exactly her share
  EXPECT_DOUBLE_EQ(lines[1].share, 0.25);
}

TEST(FairShareTest, TheWalkCanLeaveOutTheRestOfAnOwnersJobsAndKnowsTheirLeastNeed) {
  PendingQueue queue;
  queue.add({"alice", 0, 1, "a1", {8000, 0, 4}});
  queue.add({"alice", 0, 2, "a2", {1000, 0, 8}});
  queue.add({"bob", 0, 3, "b1", {2000, 0, 1}});
  queue.add({"alice", 0, 4, "a3", {4000, 0, 2}});
  EXPECT_EQ(queue.least_need("alice"), (Resources{1000, 0, 2}));  // each dimension apart
  std::vector<std::string> seen;
  queue.walk_owners([](const std::string&) { return 0.0; }, [&](const std::string& owner, const std::string& id) {
    seen.push_back(id);
    return owner == "alice" ? PendingQueue::Visit::kSkipOwner : PendingQueue::Visit::kNext;
  });
  EXPECT_EQ(seen, (std::vector<std::string>{"a1", "b1"}));
  queue.remove({"alice", 0, 4, "a3", {4000, 0, 2}});
  EXPECT_EQ(queue.least_need("alice"), (Resources{1000, 0, 4}));
}

}  // namespace
}  // namespace ag::sched
