// Agent over fakes of everything it talks to (agent_fixture.h). Each test plays the
// head's side of the protocol and checks what the agent does and answers.
#include "worker/agent_fixture.h"

#include "api/log_frame.h"

namespace ag::worker::agent_testing {
namespace {
TEST_F(AgentTest, RegistersWithResourcesAndWhatAPreviousAgentLeft) {
  api::TaskExit ended;
  ended.exit_code = 0;
  launcher_.recovered = {{{"job_aaaaaaaaaaaa", 0, 0}, 77, std::nullopt}, {{"job_bbbbbbbbbbbb", 2, 3}, 78, ended}};
  config_.allowed_mounts = {"/data", "/nfs"};
  start();
  EXPECT_EQ(packages_.cleanups, 1);
  auto channel = dialer_.accept();
  auto sent = decode_all(channel->take_text());
  ASSERT_EQ(sent.size(), 1u);
  auto reg = std::get<api::Register>(sent[0]);
  EXPECT_EQ(reg.node_id, "node_abcdef012345");
  EXPECT_EQ(reg.address, "127.0.0.2");
  EXPECT_EQ(reg.cpu_millis, 8000);
  EXPECT_EQ(reg.gpu_ids, (std::vector<int>{0, 1}));
  EXPECT_EQ(reg.running, (std::vector<api::RunningTask>{{{"job_aaaaaaaaaaaa", 0, 0}, 77}}));
  ASSERT_EQ(reg.exited.size(), 1u);
  EXPECT_EQ(reg.exited[0].task, (api::TaskKey{"job_bbbbbbbbbbbb", 2, 3}));
  EXPECT_EQ(reg.busy_ports, (std::vector<int>{29500}));
  EXPECT_EQ(reg.container_engine, "podman 4.3.1");
  EXPECT_EQ(reg.allowed_mounts, (std::vector<std::string>{"/data", "/nfs"}));
  EXPECT_FALSE(first_.has_value());  // ready only once the head answers
  channel->deliver(api::encode(api::Registered{config_.node_id, 7000}));
  ASSERT_TRUE(first_.has_value());
  EXPECT_TRUE(first_->ok());
}

TEST_F(AgentTest, LaunchStartsTheTaskWithItsWholeEnvironmentAndReportsThePid) {
  auto channel = start_registered();
  channel->deliver(api::encode(launch_of(kTask)));
  ASSERT_EQ(launcher_.launched.size(), 1u);
  const LaunchSpec& spec = launcher_.launched[0];
  EXPECT_EQ(spec.id, kTask);
  EXPECT_EQ(spec.entrypoint, "python train.py");
  EXPECT_EQ(spec.orphan_timeout_ms, 7000);  // the head's node timeout
  EXPECT_EQ(spec.working_dir, config_.data_dir + "/work/job_0123456789ab.0.1");
  EXPECT_EQ(spec.env.at("RANK"), "1");
  EXPECT_EQ(spec.env.at("PYTHONPATH"), "/code:/root");
  EXPECT_EQ(spec.env.at("PYTHONUNBUFFERED"), "1");
  EXPECT_EQ(spec.env.count("AG_TOKEN"), 0u);
  auto started = only<api::TaskStarted>(decode_all(channel->take_text()));
  EXPECT_EQ(started, (std::vector<api::TaskStarted>{{kTask, 4000}}));
}

TEST_F(AgentTest, AHostTaskIsItsOwnersAccountAndItsVariablesExpandAgainstThat) {
  launcher_.identity_of["alice"] = {{"HOME", "/data/homes/1900000000"}, {"USER", "ag-alice"}, {"LOGNAME", "ag-alice"}};
  auto channel = start_registered();
  api::Launch launch = launch_of(kTask);
  launch.owner = "alice";
  launch.env_vars = {{"CACHE", "$HOME/.cache"}, {"WHO", "${USER}"}};
  channel->deliver(api::encode(launch));
  ASSERT_EQ(launcher_.launched.size(), 1u);
  const auto& env = launcher_.launched[0].env;
  EXPECT_EQ(env.at("HOME"), "/data/homes/1900000000");
  EXPECT_EQ(env.at("USER"), "ag-alice");
  EXPECT_EQ(env.at("LOGNAME"), "ag-alice");
  EXPECT_EQ(env.at("CACHE"), "/data/homes/1900000000/.cache");
  EXPECT_EQ(env.at("WHO"), "ag-alice");
}

TEST_F(AgentTest, ATaskWithAnImageRunsInItWithTheImagesEnvironmentUnderneath) {
  config_.allowed_mounts = {data_dir_.string()};
  auto channel = start_registered();
  api::Launch launch = launch_of(kTask);
  launch.image = "registry.example/team/train:1.4";
  launch.env_vars = {{"PATH", "/code/bin:$PATH"}};
  launch.mounts = {{data_dir_.string(), "/data", true}};
  channel->deliver(api::encode(launch));

  EXPECT_EQ(images_.prepared, std::vector<std::string>{"registry.example/team/train:1.4"});
  ASSERT_EQ(launcher_.launched.size(), 1u);
  const LaunchSpec& spec = launcher_.launched[0];
  ASSERT_TRUE(spec.container.has_value());
  EXPECT_EQ(spec.container->image, "registry.example/team/train:1.4");
  EXPECT_EQ(spec.container->engine.name, "podman");
  EXPECT_EQ(spec.container->node_id, config_.node_id);
  EXPECT_EQ(spec.container->mounts, (std::vector<api::Mount>{{data_dir_.string(), "/data", true}}));
  // $PATH is the image's, not the node's; the node's own variables stay out.
  EXPECT_EQ(spec.container->env.at("PATH"), "/code/bin:/opt/conda/bin:/usr/bin");
  EXPECT_EQ(spec.container->env.at("LANG"), "C.UTF-8");
  EXPECT_EQ(spec.container->env.at("RANK"), "1");
  EXPECT_EQ(spec.container->env.count("HOME"), 0u);
  EXPECT_EQ(spec.container->env.count("AG_TOKEN"), 0u);
  // The engine's client gets the node's environment, without its credentials.
  EXPECT_EQ(spec.env.at("PATH"), "/usr/bin");
  EXPECT_EQ(spec.env.count("AG_TOKEN"), 0u);
  EXPECT_EQ(only<api::TaskStarted>(decode_all(channel->take_text())).size(), 1u);
}

TEST_F(AgentTest, AnImageTheNodeCannotGetEndsTheTaskNamingNodeAndImage) {
  images_.progress = "pulling x:1: Copying blob sha256:ab";
  images_.error = Error{ErrorCode::kNotFound, "podman could not pull x:1: manifest unknown"};
  auto channel = start_registered();
  api::Launch launch = launch_of(kTask);
  launch.image = "x:1";
  channel->deliver(api::encode(launch));

  EXPECT_TRUE(launcher_.launched.empty());
  auto messages = decode_all(channel->take_text());
  auto notes = only<api::TaskNote>(messages);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0].text, "node node_abcdef012345 (127.0.0.2): pulling x:1: Copying blob sha256:ab");
  auto exited = only<api::TaskExited>(messages);
  ASSERT_EQ(exited.size(), 1u);
  EXPECT_EQ(exited[0].exit.start_error,
            "node node_abcdef012345 (127.0.0.2) cannot run image x:1: podman could not pull x:1: manifest unknown");
}

TEST_F(AgentTest, MountsOutsideTheAllowedFoldersOrMissingAreRefusedWithTheFix) {
  config_.allowed_mounts = {data_dir_.string()};
  auto channel = start_registered();
  api::Launch launch = launch_of(kTask);
  launch.image = "x:1";
  launch.mounts = {{"/etc", "/host-etc", true}};
  channel->deliver(api::encode(launch));
  auto exited = only<api::TaskExited>(decode_all(channel->take_text()));
  ASSERT_EQ(exited.size(), 1u);
  EXPECT_EQ(exited[0].exit.start_error,
            "mount source /etc is not under a path node node_abcdef012345 (127.0.0.2) allows (it allows " +
                data_dir_.string() + "); start its worker with `--allow-mount /etc` (or a folder above it)");

  launch.task.attempt = 1;
  launch.mounts = {{data_dir_.string() + "/missing", "/data", false}};
  channel->deliver(api::encode(launch));
  exited = only<api::TaskExited>(decode_all(channel->take_text()));
  ASSERT_EQ(exited.size(), 1u);
  EXPECT_THAT(exited[0].exit.start_error, ::testing::HasSubstr("mount source " + data_dir_.string() +
                                                                "/missing does not exist on node node_abcdef012345"));
  EXPECT_TRUE(launcher_.launched.empty());
  EXPECT_TRUE(images_.prepared.empty()) << "nothing pulled for a task that cannot run";
}

TEST_F(AgentTest, WhatGoesIntoTheEnginesCommandLineIsCheckedAgainOnTheNode) {
  config_.allowed_mounts = {data_dir_.string()};
  auto channel = start_registered();
  api::Launch launch = launch_of(kTask);
  launch.image = "--privileged";
  channel->deliver(api::encode(launch));
  auto exited = only<api::TaskExited>(decode_all(channel->take_text()));
  ASSERT_EQ(exited.size(), 1u);
  EXPECT_THAT(exited[0].exit.start_error, HasSubstr("image '--privileged' starts with '-'"));

  launch.task.attempt = 1;
  launch.image = "x:1";
  launch.mounts = {{data_dir_.string() + ",readonly=false", "/data", true}};
  channel->deliver(api::encode(launch));
  exited = only<api::TaskExited>(decode_all(channel->take_text()));
  ASSERT_EQ(exited.size(), 1u);
  EXPECT_THAT(exited[0].exit.start_error, HasSubstr("holds ',', ':' or a control character"));
  EXPECT_TRUE(launcher_.launched.empty());
  EXPECT_TRUE(images_.prepared.empty());

  channel->deliver(api::encode(api::Pull{"pull_1", "-x"}));
  auto updates = only<api::PullUpdate>(decode_all(channel->take_text()));
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_TRUE(updates[0].done);
  EXPECT_THAT(updates[0].error, HasSubstr("starts with '-'"));
}

TEST_F(AgentTest, OutputTravelsAsLogFramesAndTheExitUntilAcknowledged) {
  auto channel = start_registered();
  channel->deliver(api::encode(launch_of(kTask)));
  channel->take_text();
  write_output(kTask, "epoch 1\n");
  write_output(kTask, "epoch 2\n");
  ASSERT_EQ(channel->sent.size(), 2u);
  std::string_view payload;
  auto header = api::decode_log_frame(channel->sent[1].first, &payload);
  ASSERT_TRUE(header.ok());
  EXPECT_EQ(header->task, kTask);
  EXPECT_EQ(header->offset, 8);
  EXPECT_EQ(payload, "epoch 2\n");
  api::TaskExit exit;
  exit.exit_code = 3;
  launcher_.end(kTask, exit);
  auto exited = only<api::TaskExited>(decode_all(channel->take_text()));
  // With its length, so that the head acknowledges it only once it holds every byte.
  EXPECT_EQ(exited, (std::vector<api::TaskExited>{{kTask, exit, 16}}));
  EXPECT_TRUE(launcher_.forgotten.empty());
  channel->deliver(api::encode(api::ExitAck{kTask}));
  EXPECT_EQ(launcher_.forgotten, std::vector<api::TaskKey>{kTask});
}

// Sizes of all log frames sent so far (payload bytes), and the text frames apart.
static int64_t log_bytes_sent(const std::vector<std::pair<std::string, bool>>& sent) {
  int64_t total = 0;
  for (const auto& [data, binary] : sent) {
    if (!binary) continue;
    std::string_view payload;
    auto header = api::decode_log_frame(data, &payload);
    EXPECT_TRUE(header.ok());
    total += static_cast<int64_t>(payload.size());
  }
  return total;
}

TEST_F(AgentTest, OutputIsReadOnlyAsFastAsTheHeadTakesIt) {
  auto channel = start_registered();
  channel->deliver(api::encode(launch_of(kTask)));
  channel->take_text();
  // The task writes 64 MiB at once while the channel to the head is slow.
  write_output(kTask, std::string(64 << 20, 'x'));
  int64_t first = log_bytes_sent(channel->sent);
  EXPECT_GT(first, 0);
  EXPECT_LE(channel->queued, size_t{5} << 20);  // the window (4 MiB) and one frame at most
  EXPECT_LT(first, int64_t{64} << 20);
  // More output meanwhile reads nothing while the channel is full.
  int reads = launcher_.reads;
  write_output(kTask, "more\n");
  EXPECT_EQ(launcher_.reads, reads);
  EXPECT_EQ(log_bytes_sent(channel->sent), first);
  // Each time the head has taken what was sent, the next window follows; in the end
  // every byte arrives, in order, and then the exit.
  launcher_.end(kTask, api::TaskExit{0, std::nullopt, "", ""});
  EXPECT_TRUE(only<api::TaskExited>(decode_all(channel->take_text())).empty());
  std::string received;
  std::vector<std::string> texts;
  for (int round = 0; round < 100 && received.size() < (size_t{64} << 20) + 5; ++round) {
    for (const auto& [data, binary] : channel->sent) {
      if (!binary) continue;
      std::string_view payload;
      auto header = api::decode_log_frame(data, &payload);
      ASSERT_TRUE(header.ok());
      ASSERT_EQ(header->offset, static_cast<int64_t>(received.size()));
      received += payload;
    }
    for (auto& text : channel->take_text()) texts.push_back(std::move(text));
    channel->sent.clear();
    channel->drain();
  }
  EXPECT_EQ(received.size(), (size_t{64} << 20) + 5);
  EXPECT_EQ(received.substr(received.size() - 5), "more\n");
  for (auto& text : channel->take_text()) texts.push_back(std::move(text));
  auto exited = only<api::TaskExited>(decode_all(texts));
  ASSERT_EQ(exited.size(), 1u);
  EXPECT_EQ(exited[0].log_bytes, (int64_t{64} << 20) + 5);
}

TEST_F(AgentTest, TasksTakeTurnsOnABusyChannel) {
  auto channel = start_registered();
  const api::TaskKey other{"job_0123456789ab", 0, 2};
  channel->deliver(api::encode(launch_of(kTask)));
  channel->deliver(api::encode(launch_of(other)));
  channel->take_text();
  channel->queued = size_t{8} << 20;  // the channel is full
  write_output(kTask, std::string(8 << 20, 'a'));
  write_output(other, "b\n");
  EXPECT_TRUE(channel->sent.empty());
  channel->drain();
  // The quiet task's line goes out within the first window, not after 8 MiB of the other.
  bool seen = false;
  for (const auto& [data, binary] : channel->sent) {
    std::string_view payload;
    auto header = api::decode_log_frame(data, &payload);
    if (header.ok() && header->task == other) seen = payload == "b\n";
  }
  EXPECT_TRUE(seen);
  EXPECT_LT(log_bytes_sent(channel->sent), int64_t{8} << 20);
}

TEST_F(AgentTest, TheHeadAsksAgainForBytesItCouldNotStoreAndTheExitFollowsThem) {
  auto channel = start_registered();
  channel->deliver(api::encode(launch_of(kTask)));
  channel->take_text();
  write_output(kTask, "0123456789");
  launcher_.end(kTask, api::TaskExit{0, std::nullopt, "", ""});
  ASSERT_EQ(only<api::TaskExited>(decode_all(channel->take_text())).size(), 1u);
  channel->sent.clear();
  // The head's disk was full from byte 4 on: it asks for the rest once there is room.
  channel->deliver(api::encode(api::LogResume{kTask, 4}));
  ASSERT_EQ(channel->sent.size(), 2u);
  std::string_view payload;
  auto header = api::decode_log_frame(channel->sent[0].first, &payload);
  ASSERT_TRUE(header.ok());
  EXPECT_EQ(header->offset, 4);
  EXPECT_EQ(payload, "456789");
  auto exited = only<api::TaskExited>(decode_all(channel->take_text()));
  ASSERT_EQ(exited.size(), 1u);
  EXPECT_EQ(exited[0].log_bytes, 10);
  EXPECT_TRUE(launcher_.forgotten.empty());  // kept until the head acknowledges
}

TEST_F(AgentTest, KillReachesTheLauncherOrSaysTheTaskIsNotHere) {
  auto channel = start_registered();
  channel->deliver(api::encode(launch_of(kTask)));
  channel->take_text();
  channel->deliver(api::encode(api::Kill{kTask, 2500}));
  EXPECT_EQ(launcher_.kills, (std::vector<std::pair<api::TaskKey, int64_t>>{{kTask, 2500}}));
  api::TaskKey unknown{"job_ffffffffffff", 0, 0};
  channel->deliver(api::encode(api::Kill{unknown, 2500}));
  auto exited = only<api::TaskExited>(decode_all(channel->take_text()));
  ASSERT_EQ(exited.size(), 1u);
  EXPECT_EQ(exited[0].task, unknown);
  EXPECT_EQ(exited[0].exit.lost, "the worker does not run this task");
}

TEST_F(AgentTest, LaunchesAndKillsOfAHeadOlderThanTheNewestLeaderAreIgnored) {
  start();
  auto channel = dialer_.accept();
  channel->take_text();
  channel->deliver(api::encode(api::Registered{config_.node_id, 7000, "", 3}));  // leader of epoch 3
  api::Launch stale = launch_of(kTask);
  stale.epoch = 2;  // a head that lost its lease and has not noticed
  channel->deliver(api::encode(stale));
  EXPECT_TRUE(launcher_.launched.empty());
  api::Launch current = launch_of(kTask);
  current.epoch = 3;
  channel->deliver(api::encode(current));
  ASSERT_EQ(launcher_.launched.size(), 1u);
  channel->take_text();
  channel->deliver(api::encode(api::Kill{kTask, 2500, 2}));
  EXPECT_TRUE(launcher_.kills.empty()) << "a stale kill";
  channel->deliver(api::encode(api::Kill{kTask, 2500, 3}));
  EXPECT_EQ(launcher_.kills.size(), 1u);
}

TEST_F(AgentTest, ARegistrationByAHeadOlderThanTheNewestSeenIsDropped) {
  auto channel = start_registered();
  channel->deliver(api::encode(api::Registered{config_.node_id, 7000, "", 5}));
  channel->drop("the leader went away");
  clock_.advance(250);
  auto older = dialer_.accept();
  older->take_text();
  older->deliver(api::encode(api::Registered{config_.node_id, 7000, "", 4}));
  EXPECT_TRUE(older->closed) << "the worker looks for the head that leads";
  EXPECT_EQ(dialer_.skips, 1) << "starting at the next head";
}

TEST_F(AgentTest, AStaleHeadsMessagesDoNotKeepTheNodesTasksAlive) {
  auto channel = start_registered();
  channel->deliver(api::encode(api::Registered{config_.node_id, 7000, "", 5}));
  channel->deliver(api::encode(launch_of(kTask)));
  ASSERT_EQ(launcher_.launched.size(), 1u);
  // Only a stale head still talks to this node: its kills are no heartbeat.
  for (int i = 0; i < 8; ++i) {
    clock_.advance(1000);
    channel->deliver(api::encode(api::Kill{{"job_ffffffffffff", 0, 0}, 100, 4}));
  }
  EXPECT_TRUE(launcher_.killed_all) << "fenced after the node timeout, as with no head at all";
}

TEST_F(AgentTest, ALoneHeadAtEpochZeroIsAlwaysHeard) {
  auto channel = start_registered();
  channel->deliver(api::encode(api::Registered{config_.node_id, 7000, "", 5}));
  channel->drop("the cluster moved back to one head");
  clock_.advance(250);
  auto lone = dialer_.accept();
  lone->take_text();
  lone->deliver(api::encode(api::Registered{config_.node_id, 7000}));
  EXPECT_FALSE(lone->closed);
  lone->deliver(api::encode(launch_of(kTask)));
  EXPECT_EQ(launcher_.launched.size(), 1u);
}

TEST_F(AgentTest, ALaunchItCannotReadEndsItsTaskWithTheReason) {
  auto channel = start_registered();
  nlohmann::json bad = nlohmann::json::parse(api::encode(launch_of(kTask)));
  bad["env"] = "PATH=/bin";
  channel->deliver(bad.dump());
  EXPECT_TRUE(launcher_.launched.empty());
  auto exited = only<api::TaskExited>(decode_all(channel->take_text()));
  ASSERT_EQ(exited.size(), 1u);
  EXPECT_EQ(exited[0].task, kTask);
  EXPECT_THAT(exited[0].exit.start_error, HasSubstr("launch.env: expected an object of strings"));
}

TEST_F(AgentTest, AnyOtherBadMessageIsAnsweredWithAnError) {
  auto channel = start_registered();
  channel->deliver(R"({"type":"reboot"})");
  channel->deliver("not json");
  auto errors = only<api::ErrorMessage>(decode_all(channel->take_text()));
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_THAT(errors[0].message, HasSubstr("unknown message type 'reboot'"));
  EXPECT_THAT(errors[1].message, HasSubstr("not valid JSON"));
}

TEST_F(AgentTest, LaunchFailuresAreReportedAsStartErrors) {
  auto channel = start_registered();
  launcher_.fail_launch = internal_error("cannot exec /bin/sh");
  channel->deliver(api::encode(launch_of(kTask)));
  api::Launch python = launch_of({"job_0123456789ab", 0, 2});
  python.python_executable = "/no/such/python";
  channel->deliver(api::encode(python));
  auto exited = only<api::TaskExited>(decode_all(channel->take_text()));
  ASSERT_EQ(exited.size(), 2u);
  EXPECT_EQ(exited[0].exit.start_error, "cannot exec /bin/sh");
  EXPECT_THAT(exited[1].exit.start_error, HasSubstr("python executable '/no/such/python' not found on node"));
}

TEST_F(AgentTest, PythonExecutableIsFirstOnPath) {
  auto channel = start_registered();
  api::Launch launch = launch_of(kTask);
  launch.python_executable = "/bin/sh";  // any executable file
  channel->deliver(api::encode(launch));
  ASSERT_EQ(launcher_.launched.size(), 1u);
  const std::string path = launcher_.launched[0].env.at("PATH");
  EXPECT_THAT(path, HasSubstr(config_.data_dir + "/python-shims/"));
  EXPECT_THAT(path, ::testing::EndsWith(":/usr/bin"));
  std::string shim_dir = path.substr(0, path.find(':'));
  EXPECT_TRUE(std::filesystem::exists(shim_dir + "/python"));
  EXPECT_TRUE(std::filesystem::exists(shim_dir + "/python3"));
}

TEST_F(AgentTest, WorkingDirPackagesArePreparedAndReleasedWithTheExit) {
  auto channel = start_registered();
  api::Launch launch = launch_of(kTask);
  launch.working_dir_hash = std::string(64, 'c');
  launch.owner = "alice";
  channel->deliver(api::encode(launch));
  EXPECT_EQ(packages_.prepared, std::vector<std::string>{std::string(64, 'c')});
  // The job's folder and its task go to the account of the user who submitted it.
  EXPECT_EQ(packages_.owners, std::vector<std::string>{"alice"});
  ASSERT_EQ(launcher_.launched.size(), 1u);
  EXPECT_EQ(launcher_.launched[0].working_dir, "/packages/jobs/job_0123456789ab");
  EXPECT_EQ(launcher_.launched[0].owner, "alice");
  launcher_.end(kTask, api::TaskExit{0, std::nullopt, "", ""});
  channel->deliver(api::encode(api::ExitAck{kTask}));
  EXPECT_EQ(packages_.released, std::vector<std::string>{"job_0123456789ab"});

  packages_.error = invalid_argument("hash mismatch");
  api::TaskKey second{"job_0123456789ab", 1, 0};
  launch.task = second;
  channel->take_text();
  channel->deliver(api::encode(launch));
  auto exited = only<api::TaskExited>(decode_all(channel->take_text()));
  ASSERT_EQ(exited.size(), 1u);
  EXPECT_EQ(exited[0].exit.start_error, "working_dir package sha256:" + std::string(64, 'c') + ": hash mismatch");
}

TEST_F(AgentTest, ReconnectsWithBackoffAndResendsWhatTheHeadMissed) {
  auto channel = start_registered();
  channel->deliver(api::encode(launch_of(kTask)));
  channel->take_text();
  channel->drop("connection reset");
  // Output and the end happen while the head is away.
  launcher_.write(kTask, "while away\n");
  launcher_.end(kTask, api::TaskExit{1, std::nullopt, "", ""});
  EXPECT_TRUE(channel->sent.empty());
  EXPECT_TRUE(dialer_.waiting.empty());
  clock_.advance(249);
  EXPECT_TRUE(dialer_.waiting.empty());
  clock_.advance(1);  // first retry after 250 ms
  ASSERT_EQ(dialer_.waiting.size(), 1u);
  dialer_.refuse(Error{ErrorCode::kUnavailable, "connection refused"});
  clock_.advance(499);
  EXPECT_TRUE(dialer_.waiting.empty());
  clock_.advance(1);  // then 500 ms
  auto again = dialer_.accept();
  auto reg = std::get<api::Register>(decode_all(again->take_text())[0]);
  ASSERT_EQ(reg.exited.size(), 1u);
  EXPECT_EQ(reg.exited[0].exit.exit_code, 1);
  EXPECT_EQ(reg.exited[0].log_bytes, 11);  // so the head knows whether it lacks bytes
  again->deliver(api::encode(api::Registered{config_.node_id, 7000}));
  // The head has 4 of the 11 bytes: the rest comes, then the exit again.
  again->deliver(api::encode(api::LogResume{kTask, 4}));
  ASSERT_EQ(again->sent.size(), 2u);
  std::string_view payload;
  auto header = api::decode_log_frame(again->sent[0].first, &payload);
  ASSERT_TRUE(header.ok());
  EXPECT_EQ(header->offset, 4);
  EXPECT_EQ(payload, "e away\n");
  auto exited = only<api::TaskExited>(decode_all({again->sent[1].first}));
  EXPECT_EQ(exited.size(), 1u);
}

TEST_F(AgentTest, AWrongTokenStopsTheWorker) {
  start();
  dialer_.refuse(Error{ErrorCode::kUnauthenticated, "missing or wrong cluster token"});
  ASSERT_TRUE(first_.has_value());
  EXPECT_EQ(first_->error().code, ErrorCode::kUnauthenticated);
  EXPECT_EQ(exits_, 1);
  ASSERT_TRUE(agent_->gave_up().has_value());  // the daemon exits non-zero
  clock_.advance(60'000);
  EXPECT_TRUE(dialer_.waiting.empty());  // it does not retry
}

TEST_F(AgentTest, AHeadUnreachableAtStartStopsTheWorkerWithTheReasonUnlessItShouldWait) {
  start();
  dialer_.refuse(Error{ErrorCode::kUnavailable, "cannot reach head at 127.0.0.1:1: connection refused"});
  ASSERT_TRUE(first_.has_value());
  EXPECT_EQ(first_->error().code, ErrorCode::kUnavailable);
  EXPECT_NE(first_->error().message.find("--wait-for-head"), std::string::npos) << first_->error().message;
  EXPECT_EQ(exits_, 1);
  clock_.advance(60'000);
  EXPECT_TRUE(dialer_.waiting.empty());  // it does not retry
}

TEST_F(AgentTest, WaitingForTheHeadKeepsTryingUntilItAnswers) {
  config_.wait_for_head = true;
  start();
  dialer_.refuse(Error{ErrorCode::kUnavailable, "connection refused"});
  EXPECT_EQ(exits_, 0);
  clock_.advance(250);
  ASSERT_EQ(dialer_.waiting.size(), 1u);
  auto channel = dialer_.accept();
  channel->take_text();
  channel->deliver(api::encode(api::Registered{config_.node_id, 7000}));
  EXPECT_EQ(exits_, 0);
}

TEST_F(AgentTest, ARefusedTokenComesWithTheDialersAdvice) {
  start();
  dialer_.refuse(Error{ErrorCode::kUnauthenticated, "the head refused the worker's token (HTTP 401)"});
  ASSERT_TRUE(first_.has_value());
  EXPECT_EQ(first_->error().message, "the head refused the worker's token (HTTP 401); get a new join token");
  EXPECT_EQ(exits_, 1);
}

TEST_F(AgentTest, AFinalRefusalThatExplainsItselfStandsAlone) {
  start();
  dialer_.refuse(Error{ErrorCode::kPermissionDenied, "the head does not let this token register a node"});
  ASSERT_TRUE(first_.has_value());
  EXPECT_EQ(first_->error().message, "the head does not let this token register a node");
  EXPECT_EQ(exits_, 1);
}

TEST_F(AgentTest, TheNodesOwnCredentialFromTheHeadIsKeptForLaterConnections) {
  start();
  auto channel = dialer_.accept();
  channel->take_text();
  channel->deliver(api::encode(api::Registered{config_.node_id, 7000, "agn_node-secret"}));
  EXPECT_EQ(dialer_.adopted, std::vector<std::string>{"agn_node-secret"});
  // A registration with a credential it already has hands none over.
  channel->drop("reset");
  clock_.advance(1000);
  auto again = dialer_.accept();
  again->take_text();
  again->deliver(api::encode(api::Registered{config_.node_id, 7000}));
  EXPECT_EQ(dialer_.adopted.size(), 1u);
}

TEST_F(AgentTest, ARegistrationTheHeadRefusesIsReportedAndRetried) {
  start();
  auto channel = dialer_.accept();
  channel->take_text();
  channel->deliver(api::encode(api::ErrorMessage{"node id node_x is already registered and live"}));
  ASSERT_TRUE(first_.has_value());
  EXPECT_EQ(first_->error().message, "the head refused this worker: node id node_x is already registered and live");
  channel->drop("closed by the head");
  clock_.advance(1000);
  EXPECT_EQ(dialer_.waiting.size(), 1u);  // it tries again: the live node may go away
  EXPECT_EQ(exits_, 0);
  EXPECT_FALSE(agent_->gave_up().has_value());
}

TEST_F(AgentTest, ItSendsItsProtocolVersionAndGivesUpWhenTheHeadRefusesItForGood) {
  config_.protocol_version = kWorkerProtocol + 1;
  start();
  auto channel = dialer_.accept();
  // The head's decoder refuses a register of another version, so the field is read as text.
  const auto texts = channel->take_text();
  ASSERT_FALSE(texts.empty());
  EXPECT_NE(texts.at(0).find("\"protocol_version\":" + std::to_string(kWorkerProtocol + 1)), std::string::npos)
      << texts.at(0);
  EXPECT_FALSE(agent_->gave_up().has_value());
  channel->deliver(api::encode(api::ErrorMessage{"this worker speaks worker protocol version 2, ...", true}));
  ASSERT_TRUE(first_.has_value());
  EXPECT_EQ(first_->error().message, "the head refused this worker: this worker speaks worker protocol version 2, ...");
  ASSERT_TRUE(agent_->gave_up().has_value());
  EXPECT_EQ(agent_->gave_up()->code, ErrorCode::kPermissionDenied);
  EXPECT_EQ(exits_, 1);
  channel->drop("closed by the head");
  clock_.advance(60'000);
  EXPECT_TRUE(dialer_.waiting.empty());  // it does not retry
}

TEST_F(AgentTest, HeartbeatsCarryUsageAndBusyPortsAndCheckTheLauncher) {
  auto channel = start_registered();
  clock_.advance(config_.heartbeat_ms * 3);
  auto beats = only<api::Heartbeat>(decode_all(channel->take_text()));
  ASSERT_EQ(beats.size(), 3u);
  EXPECT_EQ(beats[0].usage.cpu_percent, 12.5);
  EXPECT_EQ(beats[0].busy_ports, std::vector<int>{29500});
  EXPECT_EQ(launcher_.checks, 3);
}

TEST_F(AgentTest, ANodeThatHearsNothingFromTheHeadForTheNodeTimeoutStopsItsTasks) {
  auto channel = start_registered();  // node timeout 7000 ms
  channel->deliver(api::encode(launch_of(kTask)));
  // Heard every heartbeat: the lease goes on.
  for (int i = 0; i < 10; ++i) {
    clock_.advance(config_.heartbeat_ms);
    channel->deliver(api::encode(api::HeartbeatAck{}));
  }
  EXPECT_FALSE(launcher_.killed_all);
  // Then silence (a partition: the channel looks open but nothing arrives).
  clock_.advance(7000);
  EXPECT_FALSE(launcher_.killed_all);  // exactly the timeout: not yet
  clock_.advance(1);  // just past it, not at the next heartbeat
  EXPECT_TRUE(launcher_.killed_all);
  EXPECT_EQ(exits_, 0);  // the worker stays, to report the ends and take new work
}

TEST_F(AgentTest, ShutdownKillsEverythingAndExitsOnceTheTasksEnded) {
  auto channel = start_registered();
  channel->deliver(api::encode(launch_of(kTask)));
  agent_->shutdown(1000);
  EXPECT_TRUE(launcher_.killed_all);
  EXPECT_EQ(exits_, 0);
  launcher_.end(kTask, api::TaskExit{std::nullopt, 15, "", ""});
  EXPECT_EQ(exits_, 1);
  clock_.advance(10'000);
  EXPECT_TRUE(only<api::Heartbeat>(decode_all(channel->take_text())).empty());
}

}  // namespace
}  // namespace ag::worker::agent_testing
