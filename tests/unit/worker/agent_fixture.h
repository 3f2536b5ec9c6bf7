// The agent's test fixture: fakes of everything it talks to (the head channel through
// a fake dialer, the task launcher, the package cache, images and the clock), shared by
// agent_test.cc and agent_log_stream_test.cc.
#pragma once

#include "worker/agent.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <deque>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "fakes/fake_clock.h"
#include "fakes/fake_log_stream.h"
#include "fakes/fake_ws_connection.h"

namespace ag::worker::agent_testing {

using ::testing::HasSubstr;
using testing::FakeClock;
using testing::FakeLogStream;
using testing::FakeWsConnection;

class FakeDialer final : public HeadDialer {
 public:
  void skip() override { ++skips; }
  int skips = 0;  // heads passed over as not leading
  void dial_log_stream(LogStreamDone done) override {
    if (!offer_streams) return HeadDialer::dial_log_stream(std::move(done));
    stream_dials.push_back(std::move(done));
  }
  // Answers the oldest log stream dial with a new stream.
  std::shared_ptr<FakeLogStream> accept_stream() {
    auto stream = std::make_shared<FakeLogStream>();
    auto done = std::move(stream_dials.front());
    stream_dials.pop_front();
    done(std::shared_ptr<LogStream>(stream));
    return stream;
  }
  bool offer_streams = false;
  std::deque<LogStreamDone> stream_dials;

  void dial(Done done) override { waiting.push_back(std::move(done)); }
  std::string describe() const override { return "127.0.0.1:6379"; }
  Status adopt_credential(const std::string& credential) override {
    adopted.push_back(credential);
    return {};
  }
  std::string refused_hint() const override { return "get a new join token"; }
  std::vector<std::string> adopted;

  // Answers the oldest dial with a new connection.
  std::shared_ptr<FakeWsConnection> accept() {
    auto channel = std::make_shared<FakeWsConnection>();
    auto done = std::move(waiting.front());
    waiting.pop_front();
    done(std::shared_ptr<net::WsConnection>(channel));
    return channel;
  }
  void refuse(Error error) {
    auto done = std::move(waiting.front());
    waiting.pop_front();
    done(std::move(error));
  }
  std::deque<Done> waiting;
};

class FakeLauncher final : public TaskLauncher {
 public:
  void set_events(LauncherEvents e) override { events = std::move(e); }
  std::vector<Recovered> recover() override {
    for (const auto& r : recovered) {
      if (!r.exit) live[r.id] = r.pid;
    }
    return recovered;
  }
  Result<std::map<std::string, std::string>> identity(const std::string& owner) override {
    if (identity_of.count(owner)) return identity_of.at(owner);
    return std::map<std::string, std::string>{};
  }
  Result<int64_t> launch(const LaunchSpec& spec) override {
    launched.push_back(spec);
    if (fail_launch) return *fail_launch;
    int64_t pid = next_pid++;
    live[spec.id] = pid;
    output[spec.id] = "";
    return pid;
  }
  void kill(const api::TaskKey& id, int64_t grace_ms) override { kills.emplace_back(id, grace_ms); }
  void kill_all(int64_t grace_ms) override { killed_all = true; }
  void forget(const api::TaskKey& id) override {
    forgotten.push_back(id);
    output.erase(id);
  }
  void check() override { ++checks; }
  std::vector<Running> running() const override {
    std::vector<Running> out;
    for (const auto& [id, pid] : live) out.push_back({id, pid});
    return out;
  }
  bool idle() const override { return live.empty(); }
  bool runs(const api::TaskKey& id) const override { return live.count(id) > 0; }
  int64_t output_size(const api::TaskKey& id) const override {
    auto it = output.find(id);
    return it == output.end() ? -1 : static_cast<int64_t>(it->second.size());
  }
  Result<size_t> read_output(const api::TaskKey& id, int64_t offset, int64_t max_bytes,
                             std::string& out) const override {
    ++reads;
    auto it = output.find(id);
    if (it == output.end()) return not_found("no output");
    if (offset >= static_cast<int64_t>(it->second.size())) return size_t{0};
    const std::string piece = it->second.substr(static_cast<size_t>(offset), static_cast<size_t>(max_bytes));
    out += piece;
    return piece.size();
  }

  std::string output_path(const api::TaskKey& id) const override { return "output/" + id.to_string(); }

  // The task writes `data`.
  void write(const api::TaskKey& id, const std::string& data) {
    output[id] += data;
    events.on_output(id);
  }
  // The task ends.
  void end(const api::TaskKey& id, api::TaskExit exit) {
    live.erase(id);
    events.on_exit(id, exit);
  }

  LauncherEvents events;
  std::vector<Recovered> recovered;
  std::vector<LaunchSpec> launched;
  std::map<std::string, std::map<std::string, std::string>> identity_of;  // by owner
  std::vector<std::pair<api::TaskKey, int64_t>> kills;
  std::vector<api::TaskKey> forgotten;
  std::map<api::TaskKey, int64_t> live;
  std::map<api::TaskKey, std::string> output;
  std::optional<Error> fail_launch;
  int64_t next_pid = 4000;
  mutable int reads = 0;
  int checks = 0;
  bool killed_all = false;
};

class FakePackages final : public PackageProvider {
 public:
  void prepare(const std::string& job_id, const std::string& hash, const std::string& owner,
               std::function<void(Result<std::string>)> done) override {
    prepared.push_back(hash);
    owners.push_back(owner);
    if (error) return done(*error);
    done("/packages/jobs/" + job_id);
  }
  void release(const std::string& job_id) override { released.push_back(job_id); }
  bool retain(const std::string& job_id) override { return retained_jobs.count(job_id) > 0; }
  void remove_unused() override { ++cleanups; }

  std::vector<std::string> prepared;
  std::vector<std::string> owners;  // of each prepare
  std::vector<std::string> released;
  std::set<std::string> retained_jobs;
  std::optional<Error> error;
  int cleanups = 0;
};

class FakeImages final : public ImageProvider {
 public:
  const ContainerEngine& engine() const override { return engine_; }
  void prepare(const std::string& image, std::function<void(const std::string&)> on_progress,
               std::function<void(Result<ImageConfig>)> done) override {
    prepared.push_back(image);
    if (!progress.empty()) on_progress(progress);
    if (error) return done(*error);
    done(ImageConfig{{{"PATH", "/opt/conda/bin:/usr/bin"}, {"LANG", "C.UTF-8"}}});
  }

  ContainerEngine engine_{"podman", "/usr/bin/podman", "4.3.1"};
  std::vector<std::string> prepared;
  std::string progress;
  std::optional<Error> error;
};

const api::TaskKey kTask{"job_0123456789ab", 0, 1};

class AgentTest : public ::testing::Test {
 protected:
  AgentTest()
      : data_dir_(std::filesystem::temp_directory_path() /
                  ("ag-agent-test-" + std::to_string(::getpid()) + "-" +
                   ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    std::filesystem::create_directories(data_dir_);
    config_.node_id = "node_abcdef012345";
    config_.node_ip = "127.0.0.2";
    config_.hostname = "box";
    config_.resources.cpu_millis = 8000;
    config_.resources.memory_bytes = int64_t{32} << 30;
    config_.gpu_ids = {0, 1};
    config_.data_dir = data_dir_.string();
    config_.inherited_env = {{"PATH", "/usr/bin"}, {"AG_TOKEN", "secret"}, {"HOME", "/root"}};
  }
  ~AgentTest() override {
    agent_.reset();
    std::filesystem::remove_all(data_dir_);
  }

  void start() {
    Agent::Deps deps{clock_,
                     dialer_,
                     launcher_,
                     packages_,
                     images_,
                     [] {
                       api::NodeUsage u;
                       u.cpu_percent = 12.5;
                       return u;
                     },
                     [] { return std::vector<int>{29500}; },
                     [this] { ++exits_; }};
    agent_ = std::make_unique<Agent>(std::move(deps), config_, [this](const Status& s) { first_ = s; });
    agent_->start();
  }

  // Starts the agent and completes its registration; returns the channel.
  std::shared_ptr<FakeWsConnection> start_registered() {
    start();
    auto channel = dialer_.accept();
    channel->take_text();  // the register message
    channel->deliver(api::encode(api::Registered{config_.node_id, 7000}));
    return channel;
  }

  static std::vector<api::WorkerMessage> decode_all(const std::vector<std::string>& texts) {
    std::vector<api::WorkerMessage> out;
    for (const auto& t : texts) {
      auto m = api::decode_worker_message(t);
      EXPECT_TRUE(m.ok()) << t;
      if (m.ok()) out.push_back(m.value());
    }
    return out;
  }

  template <typename M>
  static std::vector<M> only(const std::vector<api::WorkerMessage>& messages) {
    std::vector<M> out;
    for (const auto& m : messages) {
      if (auto* x = std::get_if<M>(&m)) out.push_back(*x);
    }
    return out;
  }

  // The task writes `data`; the agent sends what is new once its batching delay passed.
  void write_output(const api::TaskKey& task, const std::string& data) {
    launcher_.write(task, data);
    clock_.advance(5);
  }

  api::Launch launch_of(const api::TaskKey& task) {
    api::Launch launch;
    launch.task = task;
    launch.entrypoint = "python train.py";
    launch.env = {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"AG_JOB_ID", task.job_id}};
    launch.env_vars = {{"PYTHONPATH", "/code:$HOME"}};
    return launch;
  }

  std::filesystem::path data_dir_;
  AgentConfig config_;
  FakeClock clock_;
  FakeDialer dialer_;
  FakeLauncher launcher_;
  FakePackages packages_;
  FakeImages images_;
  std::unique_ptr<Agent> agent_;
  std::optional<Status> first_;
  int exits_ = 0;
};

}  // namespace ag::worker::agent_testing
