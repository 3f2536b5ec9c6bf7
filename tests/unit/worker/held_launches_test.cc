// Held launches through the agent: made ready when they arrive, started only on the
// head's confirmation, dropped on its word, a kill or the channel dropping.
#include "agent_fixture.h"

namespace ag::worker::agent_testing {
namespace {

api::Launch held(api::Launch launch) {
  launch.hold = true;
  return launch;
}

TEST_F(AgentTest, ItTellsTheHeadItTakesHeldLaunches) {
  start();
  auto channel = dialer_.accept();
  auto reg = std::get<api::Register>(decode_all(channel->take_text())[0]);
  EXPECT_TRUE(reg.prepares_launches);
}

TEST_F(AgentTest, AHeldLaunchIsMadeReadyAndStartsOnlyOnTheHeadsWord) {
  auto channel = start_registered();
  channel->deliver(api::encode(held(launch_of(kTask))));
  EXPECT_EQ(launcher_.prepared, std::vector<api::TaskKey>{kTask});
  EXPECT_TRUE(launcher_.launched.empty());
  EXPECT_TRUE(only<api::TaskStarted>(decode_all(channel->take_text())).empty());
  channel->deliver(api::encode(api::ConfirmLaunch{kTask, true}));
  ASSERT_EQ(launcher_.launched.size(), 1u);
  EXPECT_EQ(launcher_.launched[0].env.at("RANK"), "1");
  auto started = only<api::TaskStarted>(decode_all(channel->take_text()));
  EXPECT_EQ(started, (std::vector<api::TaskStarted>{{kTask, 4000}}));
  // A second word changes nothing: the task runs.
  channel->deliver(api::encode(api::ConfirmLaunch{kTask, true}));
  EXPECT_EQ(launcher_.launched.size(), 1u);
  EXPECT_TRUE(channel->take_text().empty());
}

TEST_F(AgentTest, AConfirmationBeforeThePackageIsReadyStartsTheTaskOnceItIs) {
  packages_.hold = true;
  auto channel = start_registered();
  api::Launch launch = held(launch_of(kTask));
  launch.working_dir_hash = std::string(64, 'c');
  channel->deliver(api::encode(launch));
  channel->deliver(api::encode(api::ConfirmLaunch{kTask, true}));
  EXPECT_TRUE(launcher_.launched.empty());
  packages_.finish("/packages/jobs/job_0123456789ab");
  ASSERT_EQ(launcher_.launched.size(), 1u);
  EXPECT_EQ(launcher_.launched[0].working_dir, "/packages/jobs/job_0123456789ab");
}

TEST_F(AgentTest, ADroppedHeldLaunchIsUndoneAndNeverStarts) {
  auto channel = start_registered();
  api::Launch launch = held(launch_of(kTask));
  launch.working_dir_hash = std::string(64, 'c');
  channel->deliver(api::encode(launch));
  channel->deliver(api::encode(api::ConfirmLaunch{kTask, false}));
  EXPECT_EQ(launcher_.dropped, std::vector<api::TaskKey>{kTask});
  EXPECT_EQ(packages_.released, std::vector<std::string>{"job_0123456789ab"});
  // A start after the drop is a start this node cannot make: the head hears why.
  channel->take_text();
  channel->deliver(api::encode(api::ConfirmLaunch{kTask, true}));
  EXPECT_TRUE(launcher_.launched.empty());
  auto exited = only<api::TaskExited>(decode_all(channel->take_text()));
  ASSERT_EQ(exited.size(), 1u);
  EXPECT_THAT(exited[0].exit.start_error, HasSubstr("no longer held this task's launch"));
}

TEST_F(AgentTest, HeldLaunchesGoWithTheChannelThatBroughtThem) {
  auto channel = start_registered();
  channel->deliver(api::encode(held(launch_of(kTask))));
  channel->drop("connection reset");
  EXPECT_EQ(launcher_.dropped, std::vector<api::TaskKey>{kTask});
  clock_.advance(250);
  auto again = dialer_.accept();
  auto reg = std::get<api::Register>(decode_all(again->take_text())[0]);
  EXPECT_TRUE(reg.running.empty());
  again->deliver(api::encode(api::Registered{config_.node_id, 7000}));
  // The head sends it whole again.
  again->deliver(api::encode(launch_of(kTask)));
  EXPECT_EQ(launcher_.launched.size(), 1u);
}

TEST_F(AgentTest, AKilledHeldLaunchIsDroppedAndReportedAsNotRunning) {
  auto channel = start_registered();
  channel->deliver(api::encode(held(launch_of(kTask))));
  channel->deliver(api::encode(api::Kill{kTask, 2500}));
  EXPECT_EQ(launcher_.dropped, std::vector<api::TaskKey>{kTask});
  EXPECT_TRUE(launcher_.kills.empty());
  auto exited = only<api::TaskExited>(decode_all(channel->take_text()));
  ASSERT_EQ(exited.size(), 1u);
  EXPECT_EQ(exited[0].exit.lost, "the worker does not run this task");
  channel->deliver(api::encode(api::ConfirmLaunch{kTask, true}));
  EXPECT_TRUE(launcher_.launched.empty());
}

TEST_F(AgentTest, AHeldLaunchThatCannotBeMadeReadyFailsWhenConfirmedNotBefore) {
  launcher_.fail_prepare = internal_error("cannot create /data/tasks/x: No space left on device");
  auto channel = start_registered();
  channel->deliver(api::encode(held(launch_of(kTask))));
  EXPECT_TRUE(only<api::TaskExited>(decode_all(channel->take_text())).empty());
  channel->deliver(api::encode(api::ConfirmLaunch{kTask, true}));
  auto exited = only<api::TaskExited>(decode_all(channel->take_text()));
  ASSERT_EQ(exited.size(), 1u);
  EXPECT_THAT(exited[0].exit.start_error, HasSubstr("No space left on device"));
  EXPECT_TRUE(launcher_.launched.empty());
}

TEST_F(AgentTest, AConfirmationFromAHeadOlderThanTheNewestLeaderIsIgnored) {
  start();
  auto channel = dialer_.accept();
  channel->take_text();
  channel->deliver(api::encode(api::Registered{config_.node_id, 7000, "", 3}));
  api::Launch launch = held(launch_of(kTask));
  launch.epoch = 3;
  channel->deliver(api::encode(launch));
  channel->deliver(api::encode(api::ConfirmLaunch{kTask, true, 2}));
  EXPECT_TRUE(launcher_.launched.empty());
  channel->deliver(api::encode(api::ConfirmLaunch{kTask, true, 3}));
  EXPECT_EQ(launcher_.launched.size(), 1u);
}

TEST_F(AgentTest, ANodeFencedForWantOfTheHeadDropsWhatItHolds) {
  auto channel = start_registered();
  channel->deliver(api::encode(held(launch_of(kTask))));
  clock_.advance(7001);  // the node timeout without a word from the head
  EXPECT_EQ(launcher_.dropped, std::vector<api::TaskKey>{kTask});
}

}  // namespace
}  // namespace ag::worker::agent_testing
