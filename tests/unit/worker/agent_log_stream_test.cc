// The agent over a log stream (worker/log_stream.h): output records straight from the
// task's file, one at a time, with every message for the head behind them in order.
#include "worker/agent_fixture.h"

#include "api/log_frame.h"

namespace ag::worker::agent_testing {
namespace {

class AgentLogStreamTest : public AgentTest {
 protected:
  AgentLogStreamTest() { dialer_.offer_streams = true; }
};

TEST_F(AgentLogStreamTest, MessagesWaitWhileTheStreamOpensAndThenTravelOnItAfterTheOutputTheyFollow) {
  auto channel = start_registered();
  ASSERT_EQ(dialer_.stream_dials.size(), 1u);
  channel->deliver(api::encode(launch_of(kTask)));
  write_output(kTask, "epoch 1\n");
  // Nothing travels while the stream opens: not the start, not the output.
  EXPECT_TRUE(channel->sent.empty());
  auto stream = dialer_.accept_stream();
  ASSERT_EQ(stream->records.size(), 2u);
  auto started = only<api::TaskStarted>(decode_all({stream->records[0].message}));
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0].task, kTask);
  EXPECT_EQ(stream->records[1].at, (api::LogFrameHeader{kTask, 0}));
  EXPECT_EQ(stream->records[1].path, "output/" + kTask.to_string());
  EXPECT_EQ(stream->records[1].length, 8);
  stream->records.clear();
  write_output(kTask, "epoch 2\n");
  launcher_.end(kTask, api::TaskExit{0, std::nullopt, "", ""});
  ASSERT_EQ(stream->records.size(), 2u);
  EXPECT_EQ(stream->records[0].at, (api::LogFrameHeader{kTask, 8}));
  EXPECT_EQ(stream->records[0].length, 8);
  auto exited = only<api::TaskExited>(decode_all({stream->records[1].message}));
  ASSERT_EQ(exited.size(), 1u);
  EXPECT_EQ(exited[0].log_bytes, 16);
  // Heartbeats go on the stream too; the channel carries only the registration.
  clock_.advance(config_.heartbeat_ms);
  EXPECT_EQ(only<api::Heartbeat>(decode_all(stream->take_messages())).size(), 1u);
  EXPECT_TRUE(channel->sent.empty());
  channel->deliver(api::encode(api::ExitAck{kTask}));
  EXPECT_EQ(launcher_.forgotten, std::vector<api::TaskKey>{kTask});
}

TEST_F(AgentLogStreamTest, WhatWaitedForTheStreamGoesBeforeAnyOutput) {
  auto channel = start_registered();
  const api::TaskKey other{"job_0123456789ab", 0, 2};
  channel->deliver(api::encode(launch_of(kTask)));
  channel->deliver(api::encode(launch_of(other)));
  write_output(other, "quick\n");
  launcher_.end(other, api::TaskExit{0, std::nullopt, "", ""});
  // Heartbeats are not held: they keep the node alive while the stream opens.
  clock_.advance(config_.heartbeat_ms);
  EXPECT_EQ(only<api::Heartbeat>(decode_all(channel->take_text())).size(), 1u);
  auto stream = dialer_.accept_stream();
  // Both starts, then the quick task's output, then its exit: none overtakes another.
  std::vector<std::string> order;
  for (const auto& r : stream->records) {
    if (!r.path.empty()) {
      order.push_back("output " + std::to_string(r.at.task.task_index));
      continue;
    }
    auto m = decode_all({r.message});
    if (!only<api::TaskStarted>(m).empty()) order.push_back("started " + std::to_string(only<api::TaskStarted>(m)[0].task.task_index));
    if (!only<api::TaskExited>(m).empty()) order.push_back("exited " + std::to_string(only<api::TaskExited>(m)[0].task.task_index));
  }
  EXPECT_EQ(order, (std::vector<std::string>{"started 1", "started 2", "output 2", "exited 2"}));
}

TEST_F(AgentLogStreamTest, OneRecordAtATimeWithTasksTakingTurns) {
  auto channel = start_registered();
  auto stream = dialer_.accept_stream();
  stream->hold = true;
  const api::TaskKey other{"job_0123456789ab", 0, 2};
  channel->deliver(api::encode(launch_of(kTask)));
  stream->drain();
  channel->deliver(api::encode(launch_of(other)));
  stream->drain();
  stream->records.clear();
  write_output(kTask, std::string(9 << 20, 'a'));  // more than two records
  write_output(other, "b\n");
  ASSERT_EQ(stream->records.size(), 1u);  // busy until the socket took it
  stream->drain();
  stream->drain();
  stream->drain();
  std::vector<std::pair<api::TaskKey, int64_t>> order;
  for (const auto& r : stream->records) order.emplace_back(r.at.task, r.at.offset);
  // In turn: the quiet task's line goes out before the third record of the busy one.
  EXPECT_EQ(order, (std::vector<std::pair<api::TaskKey, int64_t>>{
                       {kTask, 0}, {kTask, 4 << 20}, {other, 0}, {kTask, 8 << 20}}));
  EXPECT_EQ(stream->records.back().length, 1 << 20);
}

TEST_F(AgentLogStreamTest, AHeadWithoutAStreamGetsFramesOnTheChannelInTheSameOrder) {
  auto channel = start_registered();
  channel->deliver(api::encode(launch_of(kTask)));
  write_output(kTask, "epoch 1\n");
  auto done = std::move(dialer_.stream_dials.front());
  dialer_.stream_dials.pop_front();
  done(Error{ErrorCode::kNotFound, "HTTP 404"});
  ASSERT_EQ(channel->sent.size(), 2u);
  EXPECT_EQ(only<api::TaskStarted>(decode_all({channel->sent[0].first})).size(), 1u);
  std::string_view payload;
  ASSERT_TRUE(channel->sent[1].second);
  ASSERT_TRUE(api::decode_log_frame(channel->sent[1].first, &payload).ok());
  EXPECT_EQ(payload, "epoch 1\n");
}

TEST_F(AgentLogStreamTest, ABrokenStreamDropsTheChannelSoTheHeadHearsEverythingAgain) {
  auto channel = start_registered();
  auto stream = dialer_.accept_stream();
  channel->deliver(api::encode(launch_of(kTask)));
  write_output(kTask, "epoch 1\n");
  launcher_.end(kTask, api::TaskExit{0, std::nullopt, "", ""});
  stream->fail();  // what it was given may be lost
  EXPECT_TRUE(channel->closed);
  channel->drop("closed locally");
  clock_.advance(250);
  auto again = dialer_.accept();
  // The new registration lists the exit the head has not acknowledged.
  auto reg = only<api::Register>(decode_all(again->take_text()));
  ASSERT_EQ(reg.size(), 1u);
  ASSERT_EQ(reg[0].exited.size(), 1u);
  EXPECT_EQ(reg[0].exited[0].task, kTask);
  again->deliver(api::encode(api::Registered{config_.node_id, 7000}));
  auto second = dialer_.accept_stream();
  // The head says where its copy ends; the rest follows on the new stream, then the exit.
  again->deliver(api::encode(api::LogResume{kTask, 3}));
  ASSERT_EQ(second->records.size(), 2u);
  EXPECT_EQ(second->records[0].at, (api::LogFrameHeader{kTask, 3}));
  EXPECT_EQ(second->records[0].length, 5);
  auto exited = only<api::TaskExited>(decode_all({second->records[1].message}));
  ASSERT_EQ(exited.size(), 1u);
  EXPECT_EQ(exited[0].log_bytes, 8);
  EXPECT_TRUE(stream->closed);
}

}  // namespace
}  // namespace ag::worker::agent_testing
