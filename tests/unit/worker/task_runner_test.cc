// TaskRunner over a real task supervisor (the ag this build made) in a temporary data
// dir, without cgroups: a task's output is followed as it is written and read back by
// offset, its exit code or signal is reported once, a second launch of the same task is
// refused, a kill ends it, and a new runner (a restarted agent) adopts a task that still
// runs, with its pid, and reports its end.
#include "worker/task_runner.h"

#include <sys/inotify.h>

#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <fstream>
#include <optional>

#include "fs_fixtures.h"

namespace ag::worker {
namespace {

using ::ag::testing::TempDir;

class TaskRunnerTest : public ::testing::Test {
 protected:
  TaskRunnerTest() {
    // The supervisor ends tasks whose agent is gone: this test is their agent.
    std::ofstream(dir_.path() / "agent.pid") << ::getpid() << "\n";
    runner_ = make_runner();
  }
  ~TaskRunnerTest() override {
    if (runner_) runner_->kill_all(0);
    run_until([this] { return !runner_ || runner_->idle(); });
  }

  std::unique_ptr<TaskRunner> make_runner() {
    auto runner = TaskRunner::create(io_, dir_.path().string(), "", {}, AG_BINARY);
    EXPECT_TRUE(runner.ok()) << runner.error().message;
    if (!runner.ok()) return nullptr;
    runner.value()->set_events({[this](const api::TaskKey&) { ++outputs_; },
                                [this](const api::TaskKey& id, const api::TaskExit& exit) { exits_[id] = exit; }});
    return std::move(runner.value());
  }

  LaunchSpec spec(int index, const std::string& command) {
    LaunchSpec s;
    s.id = {"job_0123456789ab", 0, index};
    s.entrypoint = command;
    s.env = {{"PATH", "/usr/bin:/bin"}, {"GREETING", "hello"}};
    s.working_dir = (dir_.path() / "work" / std::to_string(index)).string();
    s.orphan_timeout_ms = 5000;
    return s;
  }

  // Runs the io loop until `done` or 10 s pass.
  bool run_until(const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      io_.restart();
      io_.run_for(std::chrono::milliseconds(20));
    }
    return true;
  }

  std::string output(const api::TaskKey& id) {
    std::string out;
    auto n = runner_->read_output(id, 0, 1 << 20, out);
    return n.ok() ? out : "(" + n.error().message + ")";
  }

  TempDir dir_;
  boost::asio::io_context io_;
  std::unique_ptr<TaskRunner> runner_;
  int outputs_ = 0;
  std::map<api::TaskKey, api::TaskExit> exits_;
};

TEST_F(TaskRunnerTest, OutputIsFollowedAndTheExitReportedOnce) {
  const LaunchSpec task = spec(0, "printf \"$GREETING from $(pwd)\"; exit 3");
  auto pid = runner_->launch(task);
  ASSERT_TRUE(pid.ok()) << pid.error().message;
  EXPECT_GT(pid.value(), 0);
  EXPECT_EQ(runner_->launch(task).error().code, ErrorCode::kConflict) << "the same task twice";
  ASSERT_TRUE(run_until([&] { return exits_.count(task.id) > 0; }));
  EXPECT_EQ(exits_.at(task.id).exit_code, 3);
  EXPECT_GT(outputs_, 0);
  EXPECT_EQ(output(task.id), "hello from " + task.working_dir);
  EXPECT_EQ(runner_->output_size(task.id), static_cast<int64_t>(output(task.id).size()));
  std::string from_offset;
  ASSERT_TRUE(runner_->read_output(task.id, 6, 4, from_offset).ok());
  EXPECT_EQ(from_offset, "from");
  runner_->forget(task.id);
  EXPECT_FALSE(runner_->runs(task.id));
  EXPECT_TRUE(runner_->idle());
}

// Holds every inotify instance this user may still have while it lives (as IDEs, engines
// and other agents do on real machines), and gives them back after.
class InotifyExhausted {
 public:
  InotifyExhausted() {
    for (int fd; (fd = ::inotify_init1(IN_CLOEXEC)) >= 0 && fds_.size() < 100000;) fds_.push_back(fd);
    exhausted_ = errno == EMFILE || errno == ENFILE;
  }
  ~InotifyExhausted() {
    for (int fd : fds_) ::close(fd);
  }
  bool exhausted() const { return exhausted_; }

 private:
  std::vector<int> fds_;
  bool exhausted_ = false;
};

TEST_F(TaskRunnerTest, WithoutInotifyOutputAndEndsAreFollowedByPolling) {
  std::unique_ptr<TaskRunner> polling;
  {
    InotifyExhausted held;
    if (!held.exhausted()) GTEST_SKIP() << "this user's inotify instances could not be used up";
    polling = make_runner();
  }
  ASSERT_NE(polling, nullptr) << "the runner starts without inotify";
  runner_.swap(polling);
  polling.reset();
  const LaunchSpec task = spec(0, "echo first; sleep 0.3; echo second; exit 4");
  ASSERT_TRUE(runner_->launch(task).ok());
  ASSERT_TRUE(run_until([&] { return exits_.count(task.id) > 0; }));
  EXPECT_EQ(exits_.at(task.id).exit_code, 4);
  EXPECT_GE(outputs_, 1) << "output growth is noticed";
  EXPECT_EQ(output(task.id), "first\nsecond\n");
}

TEST_F(TaskRunnerTest, AKillEndsTheTaskWithItsSignal) {
  const LaunchSpec task = spec(1, "exec sleep 30");
  ASSERT_TRUE(runner_->launch(task).ok());
  EXPECT_TRUE(runner_->runs(task.id));
  runner_->kill(task.id, 2000);
  ASSERT_TRUE(run_until([&] { return exits_.count(task.id) > 0; }));
  EXPECT_EQ(exits_.at(task.id).signal, 15);
  EXPECT_FALSE(exits_.at(task.id).exit_code.has_value());
}

// A container engine passes a stop on with a helper it starts when the signal comes:
// the stop must not reach the helper too.
TEST_F(TaskRunnerTest, AStopReachesTheProcessesThereNotThoseItMakes) {
  const std::string done = (dir_.path() / "passed-on").string();
  // The helper is made as soon as the signal comes (perl's handler forks at once),
  // while the runner may still be looking for the task's processes.
  const LaunchSpec task = spec(2, "exec perl -e '$| = 1; $SIG{TERM} = sub { if (!fork) { select(undef, undef, undef, "
                                  "0.3); open(my $f, \">" + done + "\"); print $f \"passed on\\n\"; exit 0 } wait; exit "
                                  "0 }; print \"up\\n\"; sleep 1 while 1'");
  ASSERT_TRUE(runner_->launch(task).ok());
  ASSERT_TRUE(run_until([&] { return output(task.id) == "up\n"; }));
  runner_->kill(task.id, 5000);
  ASSERT_TRUE(run_until([&] { return exits_.count(task.id) > 0; }));
  EXPECT_EQ(exits_.at(task.id).exit_code, 0);
  std::ifstream in(done);
  std::string text;
  std::getline(in, text);
  EXPECT_EQ(text, "passed on");
}

TEST_F(TaskRunnerTest, ARestartedAgentAdoptsARunningTaskAndHearsItsEnd) {
  const LaunchSpec task = spec(2, "echo started; exec sleep 30");
  auto pid = runner_->launch(task);
  ASSERT_TRUE(pid.ok()) << pid.error().message;
  ASSERT_TRUE(run_until([&] { return output(task.id) == "started\n"; }));
  runner_.reset();  // the agent goes; the supervisor and the task stay

  runner_ = make_runner();
  auto recovered = runner_->recover();
  ASSERT_EQ(recovered.size(), 1u);
  EXPECT_EQ(recovered[0].id, task.id);
  EXPECT_EQ(recovered[0].pid, pid.value());
  EXPECT_FALSE(recovered[0].exit.has_value());
  EXPECT_TRUE(runner_->runs(task.id));
  EXPECT_EQ(output(task.id), "started\n") << "the whole output, from its file";
  runner_->kill(task.id, 2000);
  ASSERT_TRUE(run_until([&] { return exits_.count(task.id) > 0; }));
  EXPECT_EQ(exits_.at(task.id).signal, 15);
}

}  // namespace
}  // namespace ag::worker
