// WorkerGateway over its real collaborators (a NodeRegistry, a LogStore on a temporary
// folder, a JobLayer over a memory store) and a fake clock. Each test plays a
// worker on a fake WebSocket: it sends what a worker sends and checks what the head
// answers on the channel and what it records.
#include "head/gateway/worker_gateway.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/log_frame.h"
#include "fakes/fake_clock.h"
#include "fakes/fake_ws_connection.h"
#include "head/auth/access_control.h"
#include "head/auth/audit_log.h"
#include "head/jobs/job_layer.h"
#include "head/logs/log_store.h"
#include "head/nodes/node_registry.h"
#include "head/store/memory_store.h"

namespace ag::head {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using testing::FakeClock;
using testing::FakeWsConnection;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

constexpr int64_t kNodeTimeoutMs = 1000;
constexpr int64_t kKillGraceMs = 3000;

class WorkerGatewayTest : public ::testing::Test {
 protected:
  WorkerGatewayTest()
      : dir_(fs::temp_directory_path() / ("ag-gateway-test-" + std::to_string(::getpid()) + "-" +
                                          ::testing::UnitTest::GetInstance()->current_test_info()->name())),
        logs_((dir_ / "logs").string(), 128, nullptr, nullptr, [this](int fd) {
          if (!fail_fsync_) return ::fsync(fd);
          errno = ENOSPC;  // as when the disk filled while the kernel wrote the log back
          return -1;
        }) {
    JobConfig jobs_config;
    jobs_config.kill_grace_ms = kKillGraceMs;
    jobs_ = std::make_unique<JobLayer>(JobLayer::Deps{clock_, store_, nodes_, nodes_, logs_, clock_}, jobs_config);
    WorkerGatewayConfig config;
    config.node_timeout_ms = kNodeTimeoutMs;
    audit_ = std::make_unique<AuditLog>(store_, jobs_->table);
    gateway_ = std::make_unique<WorkerGateway>(
        WorkerGateway::Deps{clock_, nodes_, *jobs_, logs_, clock_, access_, *audit_}, config);
    EXPECT_TRUE(access_.bootstrap(admin_token_, join_token_));
    // The usual nodes hold their own credentials, as workers that joined before do.
    for (const char* id : {"node_a", "node_b"}) {
      access_.issue_node_credential(id, [this, id](Result<std::string> token) { credentials_[id] = token.value(); });
    }
    clock_.run_ready();
  }
  ~WorkerGatewayTest() override {
    gateway_.reset();
    jobs_.reset();
    fs::remove_all(dir_);
  }

  // A worker's channel, accepted by the gateway, made with `node_id`'s own credential.
  std::shared_ptr<FakeWsConnection> connect(const std::string& node_id = "node_a") {
    return connect_with(credentials_[node_id]);
  }
  // A channel made with `token` (the upgrade let it through).
  std::shared_ptr<FakeWsConnection> connect_with(const std::string& token) {
    auto channel = std::make_shared<FakeWsConnection>();
    gateway_->on_connection(channel, upgrade_request(api::kWorkerConnectPath, "Bearer " + token));
    return channel;
  }

  static api::Register registration(const std::string& node_id) {
    api::Register r;
    r.node_id = node_id;
    r.address = "127.0.0.2";
    r.hostname = "gpu-box";
    r.cpu_millis = 4000;
    r.memory_bytes = int64_t{8} << 30;
    r.gpu_ids = {0, 1};
    r.busy_ports = {29500};
    return r;
  }

  // Connects and registers `node_id`, forgetting the head's answers.
  std::shared_ptr<FakeWsConnection> register_node(const std::string& node_id) {
    auto channel = connect(node_id);
    channel->deliver(api::encode(registration(node_id)));
    clock_.run_ready();
    channel->take_text();
    return channel;
  }

  // Submits a one-task job and lets the store's acknowledgement run; returns its id.
  std::string submit_job() {
    api::JobSpec spec;
    spec.entrypoint = "python train.py";
    std::optional<Result<std::string>> submitted;
    jobs_->controller.submit(spec, [&](Result<std::string> id) { submitted = std::move(id); });
    clock_.run_ready();
    EXPECT_TRUE(submitted.has_value() && submitted->ok());
    return submitted.has_value() && submitted->ok() ? submitted->value() : "";
  }

  // Registers `node_id` on a new channel and returns the task the head launches there
  // (the one job submitted before).
  std::pair<std::shared_ptr<FakeWsConnection>, api::TaskKey> register_and_place(const std::string& node_id) {
    auto channel = connect(node_id);
    channel->deliver(api::encode(registration(node_id)));
    clock_.run_ready();  // the scheduling pass the new node triggers
    auto launches = of_type<api::Launch>(received(*channel));
    EXPECT_EQ(launches.size(), 1u);
    return {channel, launches.empty() ? api::TaskKey{} : launches[0].task};
  }

  const TaskRecord& task_record(const api::TaskKey& key) {
    static const TaskRecord kNone;
    const Job* job = jobs_->table.find(key.job_id);
    EXPECT_NE(job, nullptr);
    if (!job || key.attempt >= static_cast<int>(job->attempts.size())) return kNone;
    const auto& tasks = job->attempts[static_cast<size_t>(key.attempt)].tasks;
    return key.task_index < static_cast<int>(tasks.size()) ? tasks[static_cast<size_t>(key.task_index)] : kNone;
  }

  // The text messages the head sent on `channel` since the last call, decoded.
  static std::vector<api::HeadMessage> received(FakeWsConnection& channel) {
    std::vector<api::HeadMessage> out;
    for (const auto& text : channel.take_text()) {
      auto message = api::decode_head_message(text);
      EXPECT_TRUE(message.ok()) << text << ": " << message.error().message;
      if (message.ok()) out.push_back(std::move(message.value()));
    }
    return out;
  }

  template <typename M>
  static std::vector<M> of_type(const std::vector<api::HeadMessage>& messages) {
    std::vector<M> out;
    for (const auto& m : messages) {
      if (const auto* typed = std::get_if<M>(&m)) out.push_back(*typed);
    }
    return out;
  }

  // The error messages among `messages`, as text.
  static std::vector<std::string> errors(const std::vector<api::HeadMessage>& messages) {
    std::vector<std::string> out;
    for (const auto& e : of_type<api::ErrorMessage>(messages)) out.push_back(e.message);
    return out;
  }

  std::string read_log(const api::TaskKey& key) {
    auto data = logs_.read(key, 0, 1 << 20);
    return data.ok() ? data.value() : "<error: " + data.error().message + ">";
  }

  static net::HttpRequest upgrade_request(const std::string& path, const std::string& authorization) {
    net::HttpRequest request;
    request.method = "GET";
    request.path = path;
    request.target = path;
    request.remote_address = "127.0.0.2";
    if (!authorization.empty()) request.headers["authorization"] = authorization;
    return request;
  }

  fs::path dir_;
  bool fail_fsync_ = false;  // the logs' fsync fails (read from the sync, inline here)
  const std::string admin_token_ = "agu_admin-token";
  const std::string join_token_ = "agj_join-token";
  FakeClock clock_;
  store::MemoryStore store_;
  AccessControl access_{{store_, clock_, clock_}};
  std::unique_ptr<AuditLog> audit_;
  std::map<std::string, std::string> credentials_;
  NodeRegistry nodes_;
  LogStore logs_;
  std::unique_ptr<JobLayer> jobs_;
  std::unique_ptr<WorkerGateway> gateway_;
};

// ---- registration ----

TEST_F(WorkerGatewayTest, AValidRegisterIsAnsweredAndAddsAnAliveNode) {
  auto channel = connect();
  channel->deliver(api::encode(registration("node_a")));

  EXPECT_THAT(received(*channel), ElementsAre(api::HeadMessage{api::Registered{"node_a", kNodeTimeoutMs}}));
  EXPECT_FALSE(channel->closed);
  const Node* node = nodes_.find("node_a");
  ASSERT_NE(node, nullptr);
  EXPECT_EQ(node->state, NodeState::kAlive);
  EXPECT_EQ(node->address, "127.0.0.2");
  EXPECT_EQ(node->hostname, "gpu-box");
  EXPECT_EQ(node->total.cpu_millis, 4000);
  EXPECT_EQ(node->total.memory_bytes, int64_t{8} << 30);
  EXPECT_EQ(node->total.gpus, 2);
  EXPECT_THAT(node->gpu_ids, ElementsAre(0, 1));
  EXPECT_THAT(node->busy_ports, ElementsAre(29500));
  EXPECT_EQ(node->registered_ms, clock_.now_ms());
  EXPECT_EQ(node->channel, channel);
}

TEST_F(WorkerGatewayTest, AFirstMessageThatIsNotARegisterIsRefusedAndClosed) {
  auto channel = connect();
  channel->deliver(api::encode(api::Heartbeat{}));
  EXPECT_THAT(errors(received(*channel)), ElementsAre("the first message must be a register message"));
  EXPECT_TRUE(channel->closed);
  EXPECT_TRUE(nodes_.nodes().empty());
}

TEST_F(WorkerGatewayTest, AFirstBinaryFrameIsRefusedAndClosed) {
  auto channel = connect();
  channel->deliver_binary(api::encode_log_frame({{"job_a", 0, 0}, 0}, "out"));
  EXPECT_THAT(errors(received(*channel)), ElementsAre("the first message must be a register message"));
  EXPECT_TRUE(channel->closed);
  EXPECT_TRUE(nodes_.nodes().empty());
  EXPECT_EQ(logs_.size({"job_a", 0, 0}), 0);
}

TEST_F(WorkerGatewayTest, ARegisterWithABadFieldIsRefusedNamingItAndClosed) {
  api::Register bad = registration("node/../a");
  const std::string text = api::encode(bad);
  auto decoded = api::decode_worker_message(text);
  ASSERT_FALSE(decoded.ok());  // the field error the head must pass on
  ASSERT_THAT(decoded.error().message, HasSubstr("node_id"));

  auto channel = connect();
  channel->deliver(text);
  EXPECT_THAT(errors(received(*channel)), ElementsAre("bad register message: " + decoded.error().message));
  EXPECT_TRUE(channel->closed);
  EXPECT_TRUE(nodes_.nodes().empty());
}

TEST_F(WorkerGatewayTest, AFirstMessageThatIsNotJsonIsABadRegister) {
  auto channel = connect();
  channel->deliver("hello?");
  auto errs = errors(received(*channel));
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_THAT(errs[0], StartsWith("bad register message: "));
  EXPECT_TRUE(channel->closed);
  EXPECT_TRUE(nodes_.nodes().empty());
}

TEST_F(WorkerGatewayTest, ASecondRegisterOnTheSameChannelIsRefusedButTheChannelStays) {
  auto channel = register_node("node_a");
  api::Register again = registration("node_b");
  channel->deliver(api::encode(again));
  EXPECT_THAT(errors(received(*channel)), ElementsAre("register is only accepted as the first message of a channel"));
  EXPECT_FALSE(channel->closed);
  EXPECT_EQ(nodes_.find("node_b"), nullptr);
  EXPECT_EQ(nodes_.find("node_a")->channel, channel);
}

TEST_F(WorkerGatewayTest, AReconnectOnANewChannelReplacesTheOldOne) {
  auto old_channel = register_node("node_a");
  auto new_channel = register_node("node_a");
  EXPECT_TRUE(old_channel->closed);
  EXPECT_EQ(nodes_.find("node_a")->channel, new_channel);

  // What still arrives on the old channel is ignored.
  const api::TaskKey key{"job_a", 0, 0};
  old_channel->deliver_binary(api::encode_log_frame({key, 0}, "stale"));
  EXPECT_EQ(logs_.size(key), 0);
  // Its late close does not disconnect the node.
  old_channel->drop("gone");
  EXPECT_EQ(nodes_.find("node_a")->state, NodeState::kAlive);
  EXPECT_EQ(nodes_.find("node_a")->channel, new_channel);
}

TEST_F(WorkerGatewayTest, ADroppedChannelLeavesTheNodeDisconnected) {
  auto channel = register_node("node_a");
  channel->drop("connection reset");
  const Node* node = nodes_.find("node_a");
  ASSERT_NE(node, nullptr);
  EXPECT_EQ(node->state, NodeState::kDisconnected);
  EXPECT_EQ(node->channel, nullptr);
}

TEST_F(WorkerGatewayTest, RunningTasksOfAJobTheHeadDoesNotKnowAreKilled) {
  const api::TaskKey orphan{"job_gone", 0, 2};
  ASSERT_TRUE(logs_.append(orphan, 0, "1234567"));  // what the head already has of it
  api::Register r = registration("node_a");
  r.running = {{orphan, 4242}};

  auto channel = connect();
  channel->deliver(api::encode(r));
  clock_.run_ready();

  auto messages = received(*channel);
  ASSERT_FALSE(messages.empty());
  EXPECT_EQ(messages[0], api::HeadMessage{(api::Registered{"node_a", kNodeTimeoutMs})});
  // No output is wanted of a task the head does not know: it is only killed.
  EXPECT_THAT(of_type<api::LogResume>(messages), IsEmpty());
  EXPECT_THAT(of_type<api::Kill>(messages), ElementsAre(api::Kill{orphan, kKillGraceMs}));
  EXPECT_FALSE(channel->closed);
}

TEST_F(WorkerGatewayTest, EndedTasksOfAJobTheHeadDoesNotKnowAreAcknowledgedAtOnce) {
  const api::TaskKey ended{"job_a", 0, 0};
  ASSERT_TRUE(logs_.append(ended, 0, "abc"));
  api::Register r = registration("node_a");
  api::TaskExited exited;
  exited.task = ended;
  exited.exit.exit_code = 0;
  r.exited = {exited};

  auto channel = connect();
  channel->deliver(api::encode(r));
  auto messages = received(*channel);
  EXPECT_THAT(of_type<api::LogResume>(messages), IsEmpty());
  EXPECT_THAT(of_type<api::ExitAck>(messages), ElementsAre(api::ExitAck{ended}));  // the worker may let go
  EXPECT_FALSE(logs_.closed(ended));
}

// ---- messages after registering ----

TEST_F(WorkerGatewayTest, AMalformedMessageIsAnsweredAndTheChannelStaysOpen) {
  auto channel = register_node("node_a");
  channel->deliver("{not json");
  channel->deliver(R"({"type":"task_exited","job_id":"job_a","attempt":"zero","task_index":0})");
  auto errs = errors(received(*channel));
  ASSERT_EQ(errs.size(), 2u);
  EXPECT_THAT(errs[0], StartsWith("the head could not accept a message:"));
  EXPECT_THAT(errs[1], StartsWith("the head could not accept a message:"));
  EXPECT_THAT(errs[1], HasSubstr("attempt"));
  EXPECT_FALSE(channel->closed);

  // The channel still carries messages.
  channel->deliver(api::encode(api::Heartbeat{}));
  EXPECT_EQ(nodes_.find("node_a")->usage.size(), 1u);
}

TEST_F(WorkerGatewayTest, TaskStartedAndExitedReachTheJobAndTheExitIsAcknowledged) {
  const std::string job_id = submit_job();
  auto [channel, key] = register_and_place("node_a");
  ASSERT_EQ(key.job_id, job_id);

  channel->deliver(api::encode(api::TaskStarted{key, 4321}));
  clock_.run_ready();
  EXPECT_EQ(task_record(key).state, TaskState::kRunning);
  EXPECT_THAT(received(*channel), IsEmpty());  // a start is not answered

  channel->deliver_binary(api::encode_log_frame({key, 0}, "done\n"));
  api::TaskExited exited;
  exited.task = key;
  exited.exit.exit_code = 0;
  channel->deliver(api::encode(exited));
  clock_.run_ready();
  // Acknowledged once the end is stored (changes are written at most every 20 ms).
  EXPECT_THAT(of_type<api::ExitAck>(received(*channel)), IsEmpty());
  clock_.advance(20);

  EXPECT_THAT(of_type<api::ExitAck>(received(*channel)), ElementsAre(api::ExitAck{key}));
  EXPECT_EQ(task_record(key).state, TaskState::kSucceeded);
  EXPECT_TRUE(logs_.closed(key));
  EXPECT_EQ(read_log(key), "done\n");
}

TEST_F(WorkerGatewayTest, WhatCrossesTheChannelIsCountedByDirectionAndType) {
  const std::string job_id = submit_job();
  auto channel = connect("node_a");
  const std::string registration_text = api::encode(registration("node_a"));
  channel->deliver(registration_text);
  clock_.run_ready();
  std::vector<std::string> sent = channel->take_text();
  size_t launch_bytes = 0, registered_bytes = 0;
  for (const auto& text : sent) {
    auto message = api::decode_head_message(text);
    ASSERT_TRUE(message.ok());
    if (std::holds_alternative<api::Launch>(message.value())) launch_bytes += text.size();
    if (std::holds_alternative<api::Registered>(message.value())) registered_bytes += text.size();
  }
  ASSERT_GT(launch_bytes, 0u);
  const api::TaskKey key{job_id, 0, 0};
  const std::string started = api::encode(api::TaskStarted{key, 4321});
  channel->deliver(started);
  const std::string frame = api::encode_log_frame({key, 0}, "done\n");
  channel->deliver_binary(frame);
  channel->deliver("{not json");
  api::TaskExited exited;
  exited.task = key;
  exited.exit.exit_code = 0;
  const std::string exited_text = api::encode(exited);
  channel->deliver(exited_text);
  clock_.run_ready();
  clock_.advance(20);
  const size_t ack_bytes = api::encode(api::ExitAck{key}).size();

  const ChannelTraffic& traffic = nodes_.traffic();
  const auto count = [](ChannelTraffic::Count c) { return std::make_pair(c.messages, c.bytes); };
  EXPECT_EQ(count(traffic.from_worker("register")), std::make_pair(uint64_t{1}, uint64_t{registration_text.size()}));
  EXPECT_EQ(count(traffic.from_worker("task_started")), std::make_pair(uint64_t{1}, uint64_t{started.size()}));
  EXPECT_EQ(count(traffic.from_worker("task_exited")), std::make_pair(uint64_t{1}, uint64_t{exited_text.size()}));
  EXPECT_EQ(count(traffic.from_worker("log_frame")), std::make_pair(uint64_t{1}, uint64_t{frame.size()}));
  EXPECT_EQ(count(traffic.from_worker("unreadable")), std::make_pair(uint64_t{1}, uint64_t{9}));
  EXPECT_EQ(count(traffic.to_worker("launch")), std::make_pair(uint64_t{1}, uint64_t{launch_bytes}));
  EXPECT_EQ(count(traffic.to_worker("registered")), std::make_pair(uint64_t{1}, uint64_t{registered_bytes}));
  EXPECT_EQ(count(traffic.to_worker("exit_ack")), std::make_pair(uint64_t{1}, uint64_t{ack_bytes}));
  EXPECT_EQ(traffic.to_worker("error").messages, 1u);  // the unreadable frame was answered
  EXPECT_EQ(traffic.to_worker("no_such_type").messages, 0u);

  std::string metrics;
  traffic.render(metrics);
  EXPECT_THAT(metrics, HasSubstr("# TYPE ag_worker_channel_messages_total counter\n"));
  EXPECT_THAT(metrics, HasSubstr("ag_worker_channel_messages_total{direction=\"to_worker\",type=\"launch\"} 1\n"));
  EXPECT_THAT(metrics, HasSubstr("ag_worker_channel_bytes_total{direction=\"from_worker\",type=\"task_started\"} " +
                                 std::to_string(started.size()) + "\n"));
  EXPECT_THAT(metrics, HasSubstr("ag_worker_channel_messages_total{direction=\"to_worker\",type=\"kill\"} 0\n"));
}

TEST_F(WorkerGatewayTest, TheExitOfATaskTheHeadDoesNotKnowIsStillAcknowledged) {
  auto channel = register_node("node_a");
  const api::TaskKey key{"job_forgotten", 1, 3};
  api::TaskExited exited;
  exited.task = key;
  exited.exit.signal = 9;
  exited.log_bytes = 100;  // bytes the head does not have, of a task it does not know
  channel->deliver(api::encode(exited));
  clock_.advance(20);
  // The worker may let go of it.
  EXPECT_THAT(received(*channel), ElementsAre(api::HeadMessage{api::ExitAck{key}}));
  EXPECT_FALSE(channel->closed);
}

TEST_F(WorkerGatewayTest, ItsOwnTasksThatEndedWhileAwayAreAskedForTheirMissingOutput) {
  submit_job();
  auto [first, key] = register_and_place("node_a");
  first->deliver(api::encode(api::TaskStarted{key, 42}));
  first->deliver_binary(api::encode_log_frame({key, 0}, "abc"));
  first->drop("connection reset");
  api::Register r = registration("node_a");
  api::TaskExited exited;
  exited.task = key;
  exited.exit.exit_code = 0;
  r.exited = {exited};
  auto channel = connect();
  channel->deliver(api::encode(r));
  clock_.run_ready();
  auto messages = received(*channel);
  EXPECT_THAT(of_type<api::LogResume>(messages), ElementsAre(api::LogResume{key, 3}));
  EXPECT_THAT(of_type<api::ExitAck>(messages), IsEmpty());  // the exit itself comes again, after the output
  EXPECT_EQ(task_record(key).state, TaskState::kRunning);
}

TEST_F(WorkerGatewayTest, ANodeMayNotReportOnAnotherNodesTask) {
  submit_job();
  auto [owner, key] = register_and_place("node_a");
  auto other = register_node("node_b");

  other->deliver(api::encode(api::TaskStarted{key, 666}));
  api::TaskExited exited;
  exited.task = key;
  exited.exit.exit_code = 1;
  other->deliver(api::encode(exited));
  clock_.run_ready();

  auto messages = received(*other);
  EXPECT_THAT(of_type<api::ExitAck>(messages), IsEmpty());
  auto errs = errors(messages);
  ASSERT_EQ(errs.size(), 2u);
  EXPECT_THAT(errs[0], StartsWith("the head refused a message:"));
  EXPECT_THAT(errs[1], StartsWith("the head refused a message:"));
  EXPECT_FALSE(other->closed);
  // Nothing changed for the task.
  EXPECT_EQ(task_record(key).state, TaskState::kStarting);
  EXPECT_FALSE(logs_.closed(key));
  EXPECT_THAT(received(*owner), IsEmpty());
}

TEST_F(WorkerGatewayTest, ALogFrameIsAppendedToTheTasksLog) {
  submit_job();
  auto [channel, key] = register_and_place("node_a");
  channel->deliver_binary(api::encode_log_frame({key, 0}, "hello\n"));
  channel->deliver_binary(api::encode_log_frame({key, 3}, "lo\nworld\n"));  // overlaps: a resend

  EXPECT_EQ(read_log(key), "hello\nworld\n");
  EXPECT_EQ(logs_.bytes_ingested(), 12);
  EXPECT_THAT(received(*channel), IsEmpty());  // log frames are not answered
  EXPECT_TRUE(fs::exists(dir_ / "logs" / key.job_id / "0.0.log"));
}

TEST_F(WorkerGatewayTest, ALogFramePastTheEndIsDroppedAndTheGapAskedForOnceASecond) {
  submit_job();
  auto [channel, key] = register_and_place("node_a");
  channel->deliver_binary(api::encode_log_frame({key, 0}, "abc"));
  channel->deliver_binary(api::encode_log_frame({key, 10}, "late"));
  channel->deliver_binary(api::encode_log_frame({key, 14}, "later"));
  EXPECT_EQ(read_log(key), "abc");
  EXPECT_THAT(received(*channel), IsEmpty());
  clock_.advance(1000);
  // One request for everything from the head's end on, however many frames missed it.
  EXPECT_THAT(received(*channel), ElementsAre(api::HeadMessage{api::LogResume{key, 3}}));
  EXPECT_FALSE(channel->closed);
  channel->deliver_binary(api::encode_log_frame({key, 3}, "defghijklmnopqrs"));
  EXPECT_EQ(read_log(key), "abcdefghijklmnopqrs");
  clock_.advance(5000);
  EXPECT_THAT(received(*channel), IsEmpty());
}

TEST_F(WorkerGatewayTest, AnExitIsAcknowledgedOnlyOnceTheHeadHoldsEveryByteOfItsLog) {
  submit_job();
  auto [channel, key] = register_and_place("node_a");
  channel->deliver(api::encode(api::TaskStarted{key, 4321}));
  channel->deliver_binary(api::encode_log_frame({key, 0}, "abc"));
  api::TaskExited exited{key, api::TaskExit{0, std::nullopt, "", ""}, 6};
  channel->deliver(api::encode(exited));
  clock_.run_ready();
  // The end is recorded, but the worker keeps its copy: no acknowledgement yet.
  EXPECT_EQ(task_record(key).state, TaskState::kSucceeded);
  EXPECT_THAT(of_type<api::ExitAck>(received(*channel)), IsEmpty());
  clock_.advance(1000);
  EXPECT_THAT(received(*channel), ElementsAre(api::HeadMessage{api::LogResume{key, 3}}));
  // The worker sends the rest and the exit again.
  channel->deliver_binary(api::encode_log_frame({key, 3}, "def"));
  channel->deliver(api::encode(exited));
  clock_.advance(20);
  EXPECT_THAT(of_type<api::ExitAck>(received(*channel)), ElementsAre(api::ExitAck{key}));
  EXPECT_EQ(read_log(key), "abcdef");
}

TEST_F(WorkerGatewayTest, AnExitWhoseLogDidNotReachTheDiskIsNotAcknowledgedAndTheLogIsTakenAgain) {
  submit_job();
  auto [channel, key] = register_and_place("node_a");
  channel->deliver(api::encode(api::TaskStarted{key, 4321}));
  channel->deliver_binary(api::encode_log_frame({key, 0}, "abcdef"));
  fail_fsync_ = true;
  api::TaskExited exited{key, api::TaskExit{0, std::nullopt, "", ""}, 6};
  channel->deliver(api::encode(exited));
  clock_.advance(1000);
  // No acknowledgement: the worker keeps its copy and is asked for the log from the start.
  EXPECT_THAT(received(*channel), ElementsAre(api::HeadMessage{api::LogResume{key, 0}}));
  fail_fsync_ = false;
  channel->deliver_binary(api::encode_log_frame({key, 0}, "abcdef"));
  channel->deliver(api::encode(exited));
  clock_.advance(20);
  EXPECT_THAT(of_type<api::ExitAck>(received(*channel)), ElementsAre(api::ExitAck{key}));
  EXPECT_EQ(read_log(key), "abcdef");
}

TEST_F(WorkerGatewayTest, OutputThatCannotBeWrittenIsReportedOnceAndAskedForAgainUntilItIs) {
  const std::string job_id = submit_job();
  auto [channel, key] = register_and_place("node_a");
  // The job's log folder cannot be made: a file stands where it would go.
  fs::create_directories(dir_ / "logs");
  std::ofstream(dir_ / "logs" / key.job_id) << "in the way";
  channel->deliver_binary(api::encode_log_frame({key, 0}, "abc"));
  channel->deliver_binary(api::encode_log_frame({key, 3}, "def"));
  clock_.run_ready();
  int reported = 0;
  for (const auto& e : jobs_->table.events(job_id)) reported += e.message.find("could not be stored") != std::string::npos;
  EXPECT_EQ(reported, 1);
  clock_.advance(1000);
  EXPECT_THAT(received(*channel), ElementsAre(api::HeadMessage{api::LogResume{key, 0}}));
  fs::remove(dir_ / "logs" / key.job_id);
  channel->deliver_binary(api::encode_log_frame({key, 0}, "abcdef"));
  EXPECT_EQ(read_log(key), "abcdef");
  clock_.advance(1000);
  EXPECT_THAT(received(*channel), IsEmpty());
}

TEST_F(WorkerGatewayTest, OutputOfAnotherNodesTaskOrOfAnUnknownTaskIsRefused) {
  submit_job();
  auto [owner, key] = register_and_place("node_a");
  auto other = register_node("node_b");
  other->deliver_binary(api::encode_log_frame({key, 0}, "forged\n"));
  other->deliver_binary(api::encode_log_frame({{"job_madeup", 0, 0}, 0}, "junk\n"));

  auto errs = errors(received(*other));
  ASSERT_EQ(errs.size(), 2u);
  EXPECT_EQ(errs[0], "the head refused a message: task " + key.to_string() + " is not placed on node node_b");
  EXPECT_EQ(errs[1], "the head refused a message: the head has no task job_madeup/0/0");
  EXPECT_EQ(read_log(key), "");
  EXPECT_EQ(logs_.bytes_ingested(), 0);
  EXPECT_FALSE(fs::exists(dir_ / "logs" / "job_madeup"));
}

TEST_F(WorkerGatewayTest, ALogFrameWithAnUnsafeJobIdIsRefusedAndWritesNothing) {
  auto channel = register_node("node_a");
  channel->deliver_binary(api::encode_log_frame({{"../x", 0, 0}, 0}, "escaped\n"));

  auto errs = errors(received(*channel));
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_THAT(errs[0], StartsWith("the head could not accept a log frame:"));
  EXPECT_THAT(errs[0], HasSubstr("job_id"));
  EXPECT_FALSE(channel->closed);
  // "<logs>/../x" would be this folder.
  EXPECT_FALSE(fs::exists(dir_ / "x"));
  std::vector<std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir_)) {
    if (entry.is_regular_file()) files.push_back(entry.path().string());
  }
  EXPECT_THAT(files, IsEmpty());
  EXPECT_EQ(logs_.bytes_ingested(), 0);
}

TEST_F(WorkerGatewayTest, AFrameTooShortForAHeaderIsRefused) {
  auto channel = register_node("node_a");
  channel->deliver_binary("ab");
  auto errs = errors(received(*channel));
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_THAT(errs[0], StartsWith("the head could not accept a log frame:"));
  EXPECT_FALSE(channel->closed);
}

TEST_F(WorkerGatewayTest, AHeartbeatRecordsAUsageSampleAndTheBusyPorts) {
  auto channel = register_node("node_a");
  clock_.advance(500);
  api::Heartbeat hb;
  hb.usage.cpu_percent = 42.5;
  hb.usage.memory_used_bytes = int64_t{3} << 30;
  hb.usage.gpus = {{0, 80, int64_t{10} << 30, int64_t{80} << 30}};
  hb.busy_ports = {29501, 29502};
  channel->deliver(api::encode(hb));

  const Node* node = nodes_.find("node_a");
  ASSERT_NE(node, nullptr);
  ASSERT_EQ(node->usage.size(), 1u);
  const UsageSample& s = node->usage.back();
  EXPECT_EQ(s.time_ms, clock_.now_ms());
  EXPECT_EQ(s.cpu_percent, 42.5);
  EXPECT_EQ(s.memory_used_bytes, int64_t{3} << 30);
  EXPECT_EQ(s.gpus, hb.usage.gpus);
  // The report replaces what the registration said.
  EXPECT_THAT(node->busy_ports, ElementsAre(29501, 29502));
  // The answer keeps the node's lease: a node that hears nothing fences itself off.
  EXPECT_THAT(received(*channel), ElementsAre(api::HeadMessage{api::HeartbeatAck{}}));
}

// ---- the upgrade ----

TEST_F(WorkerGatewayTest, CheckUpgradeAdmitsJoinTokensNodeCredentialsAndAdminsAtTheConnectPath) {
  for (const std::string& token : {join_token_, credentials_["node_a"], admin_token_}) {
    EXPECT_EQ(gateway_->check_upgrade(upgrade_request(api::kWorkerConnectPath, "Bearer " + token)), std::nullopt)
        << token;
  }

  auto missing = gateway_->check_upgrade(upgrade_request(api::kWorkerConnectPath, ""));
  ASSERT_TRUE(missing.has_value());
  EXPECT_EQ(missing->status, 401);
  EXPECT_THAT(missing->body, HasSubstr("join token"));

  auto wrong = gateway_->check_upgrade(upgrade_request(api::kWorkerConnectPath, "Bearer not-the-token"));
  ASSERT_TRUE(wrong.has_value());
  EXPECT_EQ(wrong->status, 401);
  EXPECT_THAT(wrong->body, HasSubstr("unknown or revoked token"));

  auto no_scheme = gateway_->check_upgrade(upgrade_request(api::kWorkerConnectPath, join_token_));
  ASSERT_TRUE(no_scheme.has_value());
  EXPECT_EQ(no_scheme->status, 401);

  auto elsewhere = gateway_->check_upgrade(upgrade_request("/api/jobs", "Bearer " + join_token_));
  ASSERT_TRUE(elsewhere.has_value());
  EXPECT_EQ(elsewhere->status, 404);
}

TEST_F(WorkerGatewayTest, AUsersTokenThatIsNotAnAdminsCannotRegisterANode) {
  std::optional<Result<std::string>> token;
  access_.add_user({"alice", Role::kUser}, [&](Result<std::string> t) { token = std::move(t); });
  clock_.run_ready();
  ASSERT_TRUE(token && token->ok());
  auto refused = gateway_->check_upgrade(upgrade_request(api::kWorkerConnectPath, "Bearer " + token->value()));
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->status, 403);
  EXPECT_THAT(refused->body, HasSubstr("cannot register a node; use a join token"));
}

TEST_F(WorkerGatewayTest, AnExpiredOrRevokedJoinTokenIsRefused) {
  std::optional<AccessControl::NewJoinToken> made;
  access_.create_join_token(60'000, "admin", [&](Result<AccessControl::NewJoinToken> t) { made = t.value(); });
  clock_.run_ready();
  ASSERT_TRUE(made);
  EXPECT_EQ(gateway_->check_upgrade(upgrade_request(api::kWorkerConnectPath, "Bearer " + made->token)), std::nullopt);
  clock_.advance(60'000);
  auto expired = gateway_->check_upgrade(upgrade_request(api::kWorkerConnectPath, "Bearer " + made->token));
  ASSERT_TRUE(expired.has_value());
  EXPECT_EQ(expired->status, 401);
  EXPECT_THAT(expired->body, HasSubstr("has expired"));

  for (const auto& t : access_.join_tokens()) {
    if (t.expires_ms == 0) access_.revoke_join_token(t.id, [](Result<bool>) {});  // the one start-head made
  }
  auto revoked = gateway_->check_upgrade(upgrade_request(api::kWorkerConnectPath, "Bearer " + join_token_));
  ASSERT_TRUE(revoked.has_value());
  EXPECT_EQ(revoked->status, 401);
}

// ---- node credentials ----

TEST_F(WorkerGatewayTest, AJoinTokenRegistersANewNodeWhichGetsItsOwnCredentialOnceDurable) {
  auto channel = connect_with(join_token_);
  channel->deliver(api::encode(registration("node_c")));
  EXPECT_THAT(received(*channel), IsEmpty());  // not before the credential is stored
  clock_.run_ready();

  auto registered = of_type<api::Registered>(received(*channel));
  ASSERT_EQ(registered.size(), 1u);
  EXPECT_EQ(registered[0].node_id, "node_c");
  ASSERT_THAT(registered[0].node_credential, StartsWith("agn_"));
  Principal who = access_.authenticate_token(registered[0].node_credential);
  EXPECT_EQ(who.kind, Principal::Kind::kNode);
  EXPECT_EQ(who.name, "node_c");
  ASSERT_NE(nodes_.find("node_c"), nullptr);
  EXPECT_EQ(nodes_.find("node_c")->state, NodeState::kAlive);
  auto stored = store_.get("node_credentials", "node_c");
  ASSERT_TRUE(stored.ok() && stored.value().has_value());
  EXPECT_THAT(*stored.value(), ::testing::Not(HasSubstr(registered[0].node_credential)));  // only its hash

  // With it, the node comes back at once, and is handed no new one.
  auto again = connect_with(registered[0].node_credential);
  again->deliver(api::encode(registration("node_c")));
  auto back = of_type<api::Registered>(received(*again));
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].node_credential, "");
  EXPECT_EQ(nodes_.find("node_c")->channel, again);
}

TEST_F(WorkerGatewayTest, AJoinTokenCannotTakeOverALiveNodeId) {
  auto real = register_node("node_a");
  for (const std::string& token : {join_token_, admin_token_}) {
    auto rogue = connect_with(token);
    rogue->deliver(api::encode(registration("node_a")));
    clock_.run_ready();
    auto errs = errors(received(*rogue));
    ASSERT_EQ(errs.size(), 1u);
    EXPECT_THAT(errs[0], HasSubstr("node id node_a is already registered and live"));
    EXPECT_TRUE(rogue->closed);
    // The real node keeps its channel and its credential.
    EXPECT_FALSE(real->closed);
    EXPECT_EQ(nodes_.find("node_a")->channel, real);
    EXPECT_EQ(access_.authenticate_token(credentials_["node_a"]).name, "node_a");
  }
  // While it is only disconnected (its worker may be coming back), too.
  real->drop("reset");
  auto rogue = connect_with(join_token_);
  rogue->deliver(api::encode(registration("node_a")));
  clock_.run_ready();
  EXPECT_TRUE(rogue->closed);
  EXPECT_EQ(nodes_.find("node_a")->state, NodeState::kDisconnected);
}

TEST_F(WorkerGatewayTest, AJoinTokenMayRegisterADeadNodeIdWhoseOldCredentialThenStopsWorking) {
  gateway_->start();
  auto old_channel = register_node("node_a");
  clock_.advance(kNodeTimeoutMs + 300);
  ASSERT_EQ(nodes_.find("node_a")->state, NodeState::kDead);

  auto channel = connect_with(join_token_);
  channel->deliver(api::encode(registration("node_a")));
  clock_.run_ready();
  auto registered = of_type<api::Registered>(received(*channel));
  ASSERT_EQ(registered.size(), 1u);
  EXPECT_NE(registered[0].node_credential, "");
  EXPECT_EQ(access_.authenticate_token(credentials_["node_a"]).kind, Principal::Kind::kNone);
  EXPECT_EQ(nodes_.find("node_a")->state, NodeState::kAlive);
}

TEST_F(WorkerGatewayTest, ANodeCredentialRegistersOnlyItsOwnNodeId) {
  auto channel = connect("node_a");
  channel->deliver(api::encode(registration("node_b")));
  EXPECT_THAT(errors(received(*channel)),
              ElementsAre("this node credential belongs to node node_a, not to node node_b; registration refused"));
  EXPECT_TRUE(channel->closed);
  EXPECT_EQ(nodes_.find("node_b"), nullptr);
}

TEST_F(WorkerGatewayTest, ACredentialThatCannotBeStoredRefusesTheRegistrationAndAddsNoNode) {
  store_.fail_next_writes(1);
  auto channel = connect_with(join_token_);
  channel->deliver(api::encode(registration("node_c")));
  clock_.run_ready();
  auto errs = errors(received(*channel));
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_THAT(errs[0], StartsWith("the head could not store this node's credential"));
  EXPECT_TRUE(channel->closed);
  EXPECT_EQ(nodes_.find("node_c"), nullptr);
  EXPECT_FALSE(access_.has_node_credential("node_c"));
}

TEST_F(WorkerGatewayTest, RemovingANodeRevokesItsCredentialClosesItsChannelAndLosesItsTasks) {
  const std::string job_id = submit_job();
  auto [channel, task] = register_and_place("node_a");
  std::optional<Status> removed;
  gateway_->remove_node("node_a", [&](Status s) { removed = std::move(s); });
  clock_.run_ready();
  ASSERT_TRUE(removed.has_value());
  EXPECT_TRUE(removed->ok());
  EXPECT_TRUE(channel->closed);
  EXPECT_EQ(nodes_.find("node_a"), nullptr);
  EXPECT_EQ(access_.authenticate_token(credentials_["node_a"]).kind, Principal::Kind::kNone);
  EXPECT_EQ(jobs_->table.find(job_id)->state, JobState::kFailed);  // no retries left
  EXPECT_THAT(task_record(task).reason, HasSubstr("lost"));

  std::optional<Status> unknown;
  gateway_->remove_node("node_zz", [&](Status s) { unknown = std::move(s); });
  ASSERT_TRUE(unknown.has_value());
  EXPECT_EQ(unknown->error().code, ErrorCode::kNotFound);
}

// ---- expiry ----

TEST_F(WorkerGatewayTest, ANodeThatStopsHeartBeatingIsMarkedDeadAndItsChannelClosed) {
  gateway_->start();
  auto channel = register_node("node_a");
  clock_.advance(kNodeTimeoutMs);  // silent for exactly the timeout: not yet
  EXPECT_EQ(nodes_.find("node_a")->state, NodeState::kAlive);
  clock_.advance(kNodeTimeoutMs / 2);
  EXPECT_EQ(nodes_.find("node_a")->state, NodeState::kDead);
  EXPECT_TRUE(channel->closed);
  EXPECT_EQ(nodes_.find("node_a")->channel, nullptr);
}

TEST_F(WorkerGatewayTest, HeartbeatsKeepANodeAlive) {
  gateway_->start();
  auto channel = register_node("node_a");
  for (int i = 0; i < 5; ++i) {
    clock_.advance(kNodeTimeoutMs * 8 / 10);
    channel->deliver(api::encode(api::Heartbeat{}));
  }
  EXPECT_EQ(nodes_.find("node_a")->state, NodeState::kAlive);
  EXPECT_FALSE(channel->closed);
  clock_.advance(kNodeTimeoutMs * 3 / 2);
  EXPECT_EQ(nodes_.find("node_a")->state, NodeState::kDead);
}

TEST_F(WorkerGatewayTest, ADeadNodesTasksAreEndedByTheJobController) {
  gateway_->start();
  const std::string job_id = submit_job();
  auto [channel, key] = register_and_place("node_a");
  ASSERT_EQ(key.job_id, job_id);
  channel->deliver(api::encode(api::TaskStarted{key, 777}));
  channel->deliver_binary(api::encode_log_frame({key, 0}, "step 1\n"));
  clock_.run_ready();
  ASSERT_EQ(task_record(key).state, TaskState::kRunning);

  clock_.advance(kNodeTimeoutMs * 2);
  EXPECT_EQ(nodes_.find("node_a")->state, NodeState::kDead);
  EXPECT_TRUE(task_record(key).terminal());
  EXPECT_TRUE(logs_.closed(key));
  EXPECT_EQ(read_log(key), "step 1\n");
}

}  // namespace
}  // namespace ag::head
