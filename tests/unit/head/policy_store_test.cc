// PolicyStore over a memory store: a change holds only once applied (after its write),
// a new store reads quotas and queues back, and the submit checks that depend on policy
// alone: the priority cap, the queue (unknown, conflicting, its priority), --no-preempt
// through a user's or a group's quota.
#include "head/sharing/policy_store.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "head/store/memory_store.h"

namespace ag::head {
namespace {

void write(store::MemoryStore& store, const PolicyStore::Change& change) {
  bool ok = false;
  store.write(change.batch, [&](const Status& s) { ok = s.ok(); });
  ASSERT_TRUE(ok);
  change.apply();
}

sched::Limits gpus(int64_t n) {
  sched::Limits limits;
  limits.gpus = n;
  return limits;
}

TEST(PolicyStoreTest, AChangeHoldsOnceAppliedAndANewStoreReadsItBack) {
  store::MemoryStore store;
  PolicyStore policy(store);
  ASSERT_TRUE(policy.recover().ok());
  auto change = policy.set_quota(false, "alice", gpus(4));
  EXPECT_TRUE(policy.user_quotas().empty()) << "nothing holds before the write";
  write(store, change);
  EXPECT_EQ(policy.user_quotas().at("alice").gpus, 4);
  sched::Limits share;
  share.share = 2;
  write(store, policy.set_quota(false, "bob", share));
  write(store, policy.set_quota(true, "vision", gpus(8)));
  QueueDef a100;
  a100.nodes_with = {{"gpu", "a100"}};
  a100.default_priority = 10;
  a100.per_user = gpus(2);
  write(store, policy.set_queue("a100", a100));

  PolicyStore again(store);
  ASSERT_TRUE(again.recover().ok());
  EXPECT_EQ(again.user_quotas().at("alice").gpus, 4);
  EXPECT_EQ(again.group_quotas().at("vision").gpus, 8);
  ASSERT_NE(again.queue("a100"), nullptr);
  EXPECT_EQ(*again.queue("a100"), a100);
  EXPECT_EQ(again.share_weights(), (std::map<std::string, double>{{"bob", 2.0}}));

  // Limits that set nothing remove the quota; a queue removed is gone.
  write(store, again.set_quota(false, "alice", sched::Limits{}));
  write(store, again.set_queue("a100", std::nullopt));
  EXPECT_FALSE(again.user_quotas().count("alice"));
  EXPECT_EQ(again.queue("a100"), nullptr);
}

TEST(PolicyStoreTest, TheQuotaPolicyHasTheOwnersGroupsAndTheQueuesPerUserLimits) {
  store::MemoryStore store;
  PolicyStore policy(store);
  write(store, policy.set_quota(true, "vision", gpus(8)));
  QueueDef queue;
  queue.per_user = gpus(1);
  write(store, policy.set_queue("small", queue));
  policy.set_groups_of([](const std::string& user) {
    return user == "alice" ? std::vector<std::string>{"vision"} : std::vector<std::string>{};
  });
  auto quotas = policy.quota_policy({"alice", "bob"});
  EXPECT_EQ(quotas.groups_of.at("alice"), std::vector<std::string>{"vision"});
  EXPECT_TRUE(quotas.groups_of.at("bob").empty());
  EXPECT_EQ(quotas.queue_users.at("small").gpus, 1);
}

TEST(PolicyStoreTest, SubmitChecksSayWhatWasWrong) {
  store::MemoryStore store;
  PolicyStore policy(store);
  sched::Limits capped;
  capped.max_priority = 5;
  write(store, policy.set_quota(false, "alice", capped));
  api::JobSpec spec;
  spec.priority = 9;
  auto refused = policy.check_priority_cap(spec, "alice");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->code, ErrorCode::kPermissionDenied);
  EXPECT_NE(refused->message.find("--priority 5"), std::string::npos) << refused->message;
  EXPECT_FALSE(policy.check_priority_cap(spec, "bob"));

  spec.queue = "nowhere";
  refused = policy.resolve_queue(spec, "job 0: ");
  ASSERT_TRUE(refused);
  EXPECT_NE(refused->message.find("job 0: unknown queue 'nowhere'; this cluster has no queues"), std::string::npos)
      << refused->message;
  QueueDef a100;
  a100.nodes_with = {{"gpu", "a100"}};
  a100.default_priority = 10;
  write(store, policy.set_queue("a100", a100));
  spec.queue = "a100";
  spec.constraints = {{"gpu", "h100"}};
  refused = policy.resolve_queue(spec, "");
  ASSERT_TRUE(refused);
  EXPECT_NE(refused->message.find("conflicts with queue a100"), std::string::npos) << refused->message;
  spec.constraints.clear();
  spec.priority_set = false;
  EXPECT_FALSE(policy.resolve_queue(spec, ""));
  EXPECT_EQ(spec.priority, 10) << "the queue's priority, as the job chose none";

  spec.no_preempt = true;
  refused = policy.check_no_preempt(spec, "carol", false);
  ASSERT_TRUE(refused);
  EXPECT_NE(refused->message.find("ag quota set --user carol --allow-no-preempt"), std::string::npos);
  EXPECT_FALSE(policy.check_no_preempt(spec, "carol", true)) << "admins may";
  sched::Limits allowed;
  allowed.allow_no_preempt = true;
  write(store, policy.set_quota(true, "ops", allowed));
  policy.set_groups_of([](const std::string&) { return std::vector<std::string>{"ops"}; });
  EXPECT_FALSE(policy.check_no_preempt(spec, "carol", false)) << "through a group's quota";
}

}  // namespace
}  // namespace ag::head
