// NodeRegistry: nodes kept across reconnects, the channel each is reached through,
// liveness (ALIVE -> DISCONNECTED -> DEAD) and the bounded usage history.
#include "head/nodes/node_registry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "fakes/fake_ws_connection.h"
#include "head/store/memory_store.h"

namespace ag::head {
namespace {

using ::testing::ElementsAre;
using testing::FakeWsConnection;
using ::testing::IsEmpty;

class NodeRegistryTest : public ::testing::Test {
 protected:
  // A node as the gateway builds it from a registration, heard from at `heartbeat_ms`.
  static Node make_node(const std::string& id, std::shared_ptr<FakeWsConnection> channel, int64_t heartbeat_ms = 0) {
    Node node;
    node.node_id = id;
    node.address = "127.0.0.2";
    node.hostname = "host-" + id;
    node.total.cpu_millis = 8000;
    node.total.memory_bytes = int64_t{32} << 30;
    node.state = NodeState::kAlive;
    node.last_heartbeat_steady_ms = heartbeat_ms;
    node.channel = std::move(channel);
    return node;
  }

  static UsageSample sample(int64_t time_ms, double cpu_percent = 10) {
    UsageSample s;
    s.time_ms = time_ms;
    s.cpu_percent = cpu_percent;
    return s;
  }

  static std::vector<int64_t> usage_times(const Node& node) {
    std::vector<int64_t> out;
    for (const auto& s : node.usage) out.push_back(s.time_ms);
    return out;
  }

  NodeRegistry registry_;
};

TEST_F(NodeRegistryTest, UpsertAddsANodeThatFindReturns) {
  auto channel = std::make_shared<FakeWsConnection>();
  registry_.upsert(make_node("node_a", channel));
  Node* node = registry_.find("node_a");
  ASSERT_NE(node, nullptr);
  EXPECT_EQ(node->state, NodeState::kAlive);
  EXPECT_EQ(node->total.cpu_millis, 8000);
  EXPECT_EQ(node->channel, channel);
  EXPECT_EQ(node->label(), "node_a (127.0.0.2)");
  EXPECT_EQ(registry_.find("node_b"), nullptr);
  EXPECT_EQ(registry_.nodes().size(), 1u);
}

TEST_F(NodeRegistryTest, ARegisteringAgainNodeKeepsItsUsageHistory) {
  registry_.upsert(make_node("node_a", std::make_shared<FakeWsConnection>()));
  registry_.record_usage("node_a", sample(1000, 10));
  registry_.record_usage("node_a", sample(2000, 20));

  Node again = make_node("node_a", std::make_shared<FakeWsConnection>());
  again.total.cpu_millis = 4000;  // what it offers now
  registry_.upsert(std::move(again));

  const Node* node = registry_.find("node_a");
  ASSERT_NE(node, nullptr);
  EXPECT_EQ(node->total.cpu_millis, 4000);
  EXPECT_THAT(usage_times(*node), ElementsAre(1000, 2000));
  EXPECT_EQ(node->usage.back().cpu_percent, 20);
  EXPECT_EQ(registry_.nodes().size(), 1u);
}

TEST_F(NodeRegistryTest, AReconnectOnANewChannelClosesTheOldOne) {
  auto old_channel = std::make_shared<FakeWsConnection>();
  auto new_channel = std::make_shared<FakeWsConnection>();
  registry_.upsert(make_node("node_a", old_channel));
  registry_.upsert(make_node("node_a", new_channel));
  EXPECT_TRUE(old_channel->closed);
  EXPECT_FALSE(new_channel->closed);
  EXPECT_EQ(registry_.find("node_a")->channel, new_channel);
}

TEST_F(NodeRegistryTest, UpsertOnTheSameChannelDoesNotCloseIt) {
  auto channel = std::make_shared<FakeWsConnection>();
  registry_.upsert(make_node("node_a", channel));
  registry_.upsert(make_node("node_a", channel));
  EXPECT_FALSE(channel->closed);
}

TEST_F(NodeRegistryTest, ADeadNodeThatRegistersAgainIsAlive) {
  registry_.upsert(make_node("node_a", std::make_shared<FakeWsConnection>(), 0));
  ASSERT_THAT(registry_.expire(20000, 10000), ElementsAre("node_a"));
  ASSERT_EQ(registry_.find("node_a")->state, NodeState::kDead);
  auto channel = std::make_shared<FakeWsConnection>();
  registry_.upsert(make_node("node_a", channel, 20000));
  EXPECT_EQ(registry_.find("node_a")->state, NodeState::kAlive);
  EXPECT_EQ(registry_.find("node_a")->channel, channel);
}

TEST_F(NodeRegistryTest, SendEncodesTheMessageOnTheNodesChannel) {
  auto channel = std::make_shared<FakeWsConnection>();
  registry_.upsert(make_node("node_a", channel));
  const api::Kill kill{{"job_a", 2, 3}, 5000};
  EXPECT_TRUE(registry_.send("node_a", kill));

  ASSERT_EQ(channel->sent.size(), 1u);
  EXPECT_FALSE(channel->sent[0].second);  // a text frame
  auto decoded = api::decode_head_message(channel->sent[0].first);
  ASSERT_TRUE(decoded.ok()) << decoded.error().message;
  EXPECT_EQ(decoded.value(), api::HeadMessage{kill});
}

TEST_F(NodeRegistryTest, SendGoesOnlyToTheAddressedNode) {
  auto a = std::make_shared<FakeWsConnection>();
  auto b = std::make_shared<FakeWsConnection>();
  registry_.upsert(make_node("node_a", a));
  registry_.upsert(make_node("node_b", b));
  EXPECT_TRUE(registry_.send("node_b", api::ExitAck{{"job_a", 0, 0}}));
  EXPECT_THAT(a->sent, IsEmpty());
  EXPECT_EQ(b->sent.size(), 1u);
}

TEST_F(NodeRegistryTest, SendToAnUnknownNodeReturnsFalse) {
  EXPECT_FALSE(registry_.send("node_x", api::ExitAck{{"job_a", 0, 0}}));
}

TEST_F(NodeRegistryTest, SendToADisconnectedNodeReturnsFalseAndSendsNothing) {
  auto channel = std::make_shared<FakeWsConnection>();
  registry_.upsert(make_node("node_a", channel));
  registry_.disconnected("node_a", channel.get());
  EXPECT_FALSE(registry_.send("node_a", api::ExitAck{{"job_a", 0, 0}}));
  EXPECT_THAT(channel->sent, IsEmpty());
}

TEST_F(NodeRegistryTest, DisconnectedKeepsTheNodeButDropsItsChannel) {
  auto channel = std::make_shared<FakeWsConnection>();
  registry_.upsert(make_node("node_a", channel));
  registry_.disconnected("node_a", channel.get());
  const Node* node = registry_.find("node_a");
  ASSERT_NE(node, nullptr);
  EXPECT_EQ(node->state, NodeState::kDisconnected);
  EXPECT_EQ(node->channel, nullptr);
}

TEST_F(NodeRegistryTest, DisconnectedOfAnOldChannelLeavesTheNewOneAlone) {
  auto old_channel = std::make_shared<FakeWsConnection>();
  auto new_channel = std::make_shared<FakeWsConnection>();
  registry_.upsert(make_node("node_a", old_channel));
  registry_.upsert(make_node("node_a", new_channel));
  // The old channel's close is noticed only after the worker came back.
  registry_.disconnected("node_a", old_channel.get());
  const Node* node = registry_.find("node_a");
  EXPECT_EQ(node->state, NodeState::kAlive);
  EXPECT_EQ(node->channel, new_channel);
  EXPECT_TRUE(registry_.send("node_a", api::ExitAck{{"job_a", 0, 0}}));
  EXPECT_EQ(new_channel->sent.size(), 1u);
}

TEST_F(NodeRegistryTest, DisconnectedOfAnUnknownNodeChangesNothing) {
  auto channel = std::make_shared<FakeWsConnection>();
  registry_.disconnected("node_x", channel.get());
  EXPECT_TRUE(registry_.nodes().empty());
}

TEST_F(NodeRegistryTest, DisconnectedDoesNotReviveADeadNode) {
  auto channel = std::make_shared<FakeWsConnection>();
  registry_.upsert(make_node("node_a", channel, 0));
  ASSERT_THAT(registry_.expire(20000, 10000), ElementsAre("node_a"));
  registry_.disconnected("node_a", channel.get());
  EXPECT_EQ(registry_.find("node_a")->state, NodeState::kDead);
}

TEST_F(NodeRegistryTest, ExpireMarksSilentNodesDeadOnceAndClosesTheirChannels) {
  auto silent = std::make_shared<FakeWsConnection>();
  auto talking = std::make_shared<FakeWsConnection>();
  registry_.upsert(make_node("node_silent", silent, 1000));
  registry_.upsert(make_node("node_talking", talking, 9000));

  // The timeout is exceeded only strictly after it has fully passed.
  EXPECT_THAT(registry_.expire(11000, 10000), IsEmpty());
  EXPECT_THAT(registry_.expire(11001, 10000), ElementsAre("node_silent"));

  const Node* node = registry_.find("node_silent");
  ASSERT_NE(node, nullptr);  // kept: it may register again
  EXPECT_EQ(node->state, NodeState::kDead);
  EXPECT_EQ(node->channel, nullptr);
  EXPECT_TRUE(silent->closed);
  EXPECT_EQ(registry_.find("node_talking")->state, NodeState::kAlive);
  EXPECT_FALSE(talking->closed);
  EXPECT_FALSE(registry_.send("node_silent", api::ExitAck{{"job_a", 0, 0}}));

  // Reported once: later passes do not list it again.
  EXPECT_THAT(registry_.expire(12000, 10000), IsEmpty());
  EXPECT_THAT(registry_.expire(50000, 10000), ElementsAre("node_talking"));
  EXPECT_THAT(registry_.expire(90000, 10000), IsEmpty());
}

TEST_F(NodeRegistryTest, ExpireAlsoEndsADisconnectedNodeThatNeverCameBack) {
  auto channel = std::make_shared<FakeWsConnection>();
  registry_.upsert(make_node("node_a", channel, 0));
  registry_.disconnected("node_a", channel.get());
  EXPECT_THAT(registry_.expire(10001, 10000), ElementsAre("node_a"));
  EXPECT_EQ(registry_.find("node_a")->state, NodeState::kDead);
}

TEST_F(NodeRegistryTest, RecordUsageKeepsSamplesInOrder) {
  registry_.upsert(make_node("node_a", std::make_shared<FakeWsConnection>()));
  registry_.record_usage("node_a", sample(1000, 5));
  registry_.record_usage("node_a", sample(2000, 50));
  const Node* node = registry_.find("node_a");
  EXPECT_THAT(usage_times(*node), ElementsAre(1000, 2000));
  EXPECT_EQ(node->usage.front().cpu_percent, 5);
  EXPECT_EQ(node->usage.back().cpu_percent, 50);
}

TEST_F(NodeRegistryTest, RecordUsageDropsSamplesOlderThanTheHistoryWindow) {
  registry_.upsert(make_node("node_a", std::make_shared<FakeWsConnection>()));
  const int64_t t0 = 1'700'000'000'000;
  registry_.record_usage("node_a", sample(t0));
  registry_.record_usage("node_a", sample(t0 + 1));
  registry_.record_usage("node_a", sample(t0 + 60'000));
  // The newest sample is one ms more than the window after t0: t0 falls out, t0 + 1
  // is exactly at the window's edge and stays.
  registry_.record_usage("node_a", sample(t0 + kUsageHistoryMs + 1));
  EXPECT_THAT(usage_times(*registry_.find("node_a")), ElementsAre(t0 + 1, t0 + 60'000, t0 + kUsageHistoryMs + 1));

  // A sample far later leaves only itself.
  registry_.record_usage("node_a", sample(t0 + 10 * kUsageHistoryMs));
  EXPECT_THAT(usage_times(*registry_.find("node_a")), ElementsAre(t0 + 10 * kUsageHistoryMs));
}

TEST_F(NodeRegistryTest, RecordUsageOfAnUnknownNodeAddsNoNode) {
  registry_.record_usage("node_x", sample(1000));
  EXPECT_EQ(registry_.find("node_x"), nullptr);
  EXPECT_TRUE(registry_.nodes().empty());
}

TEST_F(NodeRegistryTest, StatesHaveTheirNames) {
  EXPECT_STREQ(to_string(NodeState::kAlive), "ALIVE");
  EXPECT_STREQ(to_string(NodeState::kDisconnected), "DISCONNECTED");
  EXPECT_STREQ(to_string(NodeState::kDead), "DEAD");
}

TEST_F(NodeRegistryTest, ADrainIsStoredAndReadBackAndABadRecordDrainsNothing) {
  store::MemoryStore store;
  NodeRegistry registry;
  registry.upsert(make_node("node_a", std::make_shared<FakeWsConnection>()));
  std::set<std::string> next;
  auto record = registry.drain_record("node_a", true, &next);
  EXPECT_TRUE(registry.drained().empty()) << "nothing changes before the record is stored";
  bool stored = false;
  store.write(record, [&](const Status& s) { stored = s.ok(); });
  ASSERT_TRUE(stored);
  registry.set_drained(next);
  EXPECT_TRUE(registry.find("node_a")->draining);

  NodeRegistry after_restart;
  ASSERT_TRUE(after_restart.recover_drained(store).ok());
  EXPECT_EQ(after_restart.drained(), std::set<std::string>{"node_a"});
  after_restart.upsert(make_node("node_a", std::make_shared<FakeWsConnection>()));
  EXPECT_TRUE(after_restart.find("node_a")->draining) << "a drained node that registers again stays drained";

  store.write({{store::kMetaTable, "drained_nodes", "not a list"}}, [](const Status&) {});
  NodeRegistry bad;
  ASSERT_TRUE(bad.recover_drained(store).ok());
  EXPECT_TRUE(bad.drained().empty());
}

}  // namespace
}  // namespace ag::head
