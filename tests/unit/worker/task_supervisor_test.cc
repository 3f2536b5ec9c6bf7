// The task supervisor: its launch requests on the wire, and a real supervisor process
// starting tasks, recording their ends and reporting what it could not start.
#include "worker/task_supervisor.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "worker/fs_fixtures.h"
#include "worker/task_runner.h"

namespace ag::worker {
namespace {

namespace fs = std::filesystem;
using ::ag::testing::read_file;
using ::ag::testing::TempDir;
using ::testing::HasSubstr;

LaunchRequest sample_request() {
  LaunchRequest request;
  request.task_dir = "/data/tasks/job_1.0.0";
  request.working_dir = "/data/work/job_1.0.0";
  request.cgroup = "";
  request.marker = "job_1.0.0.abcd";
  request.orphan_timeout_ms = 2500;
  request.argv = {"/bin/sh", "-c", "echo 'a b' \"$X\""};
  request.envp = {"X=1", "EMPTY=", "PATH=/usr/bin:/bin"};
  return request;
}

TEST(LaunchRequestTest, RoundTripsEveryField) {
  LaunchRequest request = sample_request();

  auto decoded = decode_launch(encode_launch(request));

  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(decoded->task_dir, request.task_dir);
  EXPECT_EQ(decoded->working_dir, request.working_dir);
  EXPECT_EQ(decoded->cgroup, "");
  EXPECT_EQ(decoded->marker, request.marker);
  EXPECT_EQ(decoded->orphan_timeout_ms, 2500);
  EXPECT_EQ(decoded->argv, request.argv);
  EXPECT_EQ(decoded->envp, request.envp);
}

TEST(LaunchRequestTest, TheTasksLimitGroupsRoundTrip) {
  LaunchRequest request = sample_request();
  request.cgroup = "/sys/fs/cgroup/aethergrid/n1/job_1.0.0";
  request.cgroup_home = "/sys/fs/cgroup/aethergrid/n1/supervisor";
  request.limit_cgroups = {"/sys/fs/cgroup/memory/aethergrid/n1/job_1.0.0", "/sys/fs/cgroup/cpu/aethergrid/n1/job_1.0.0"};
  request.memory_cgroup = request.limit_cgroups[0];

  auto decoded = decode_launch(encode_launch(request));

  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(decoded->cgroup_home, request.cgroup_home);
  EXPECT_EQ(decoded->limit_cgroups, request.limit_cgroups);
  EXPECT_EQ(decoded->memory_cgroup, request.memory_cgroup);
  EXPECT_EQ(decoded->argv, request.argv);
  EXPECT_EQ(decoded->envp, request.envp);
  request.limit_cgroups.push_back(std::string("/x") + '\0' + "y");
  EXPECT_TRUE(has_nul(request));
}

TEST(ExitRecordTest, AnOutOfMemoryEndIsRead) {
  auto killed = parse_exit_record("signal 9 oom\n");
  ASSERT_TRUE(killed.has_value());
  EXPECT_EQ(killed->signal, 9);
  EXPECT_TRUE(killed->out_of_memory);
  auto shell = parse_exit_record("exit 137 oom\n");
  ASSERT_TRUE(shell.has_value());
  EXPECT_EQ(shell->exit_code, 137);
  EXPECT_TRUE(shell->out_of_memory);
  auto plain = parse_exit_record("exit 0\n");
  ASSERT_TRUE(plain.has_value());
  EXPECT_FALSE(plain->out_of_memory);
}

TEST(LaunchRequestTest, TheTaskAccountRoundTripsAndRootIsNeverOne) {
  LaunchRequest request = sample_request();
  EXPECT_FALSE(decode_launch(encode_launch(request))->run_as.has_value());
  request.run_as = LaunchRequest::RunAs{65534, 65534, {44, 109}};
  auto decoded = decode_launch(encode_launch(request));
  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(decoded->run_as, request.run_as);
  EXPECT_EQ(decoded->argv, request.argv);
  request.run_as = LaunchRequest::RunAs{0, 0, {}};
  EXPECT_FALSE(decode_launch(encode_launch(request)).has_value()) << "a request to run a task as root";
  std::string text = encode_launch(sample_request());
  size_t empty_at = text.find(std::string("2500\0\0", 6));
  ASSERT_NE(empty_at, std::string::npos);
  text.replace(empty_at, 6, std::string("2500\0x 1\0", 9));
  EXPECT_FALSE(decode_launch(text).has_value()) << "an account that is not numbers";
}

TEST(LaunchRequestTest, EmptyEnvironmentRoundTrips) {
  LaunchRequest request = sample_request();
  request.envp.clear();

  auto decoded = decode_launch(encode_launch(request));

  ASSERT_TRUE(decoded.has_value());
  EXPECT_TRUE(decoded->envp.empty());
  EXPECT_EQ(decoded->argv.size(), 3u);
}

TEST(LaunchRequestTest, NulBytesAreFound) {
  LaunchRequest request = sample_request();
  EXPECT_FALSE(has_nul(request));
  request.envp.push_back(std::string("X=a\0INJECTED=1", 15));
  EXPECT_TRUE(has_nul(request));
  request = sample_request();
  request.argv[2] = std::string("echo\0", 5);
  EXPECT_TRUE(has_nul(request));
}

TEST(LaunchRequestTest, MalformedRequestsAreRefused) {
  std::string good = encode_launch(sample_request());
  EXPECT_FALSE(decode_launch("").has_value());
  EXPECT_FALSE(decode_launch(good.substr(0, good.size() - 1)).has_value()) << "last field without its NUL";
  EXPECT_FALSE(decode_launch(std::string("stop\0", 5) + good.substr(7)).has_value()) << "unknown kind";
  LaunchRequest too_many = sample_request();
  std::string text = encode_launch(too_many);
  size_t argc_at = text.find(std::string("\0" "3\0", 3));
  ASSERT_NE(argc_at, std::string::npos);
  text.replace(argc_at, 3, std::string("\0" "9\0", 3));
  EXPECT_FALSE(decode_launch(text).has_value()) << "more arguments claimed than sent";
}

// A real supervisor (the `ag` binary's, started by the client), with its tasks in a
// temporary folder.
class SupervisorProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(work_ / "task");
    // The supervisor treats the agent as alive while its socket is open.
    agent_pid_file_ = (work_ / "agent.pid").string();
  }

  LaunchRequest request(const std::string& command) {
    LaunchRequest r;
    r.task_dir = (work_ / "task").string();
    r.working_dir = work_.path().string();
    r.marker = "supervisor-test-" + std::to_string(::getpid());
    r.argv = {"/bin/sh", "-c", command};
    r.envp = {"PATH=/usr/bin:/bin", "AG_TASK_MARKER=" + r.marker};
    return r;
  }

  int output_fd() {
    return ::open((work_ / "task" / "output.log").c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  }

  // The record, once the supervisor has written it (one write: a reader sees all of it
  // or none), or "" after 5 s.
  std::string wait_for_exit_record() {
    fs::path exit = work_ / "task" / "exit";
    for (int i = 0; i < 500; ++i) {
      if (fs::exists(exit)) {
        std::string record = read_file(exit);
        if (!record.empty()) return record;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return "";
  }

  TempDir work_;
  std::string agent_pid_file_;
  SupervisorClient client_{AG_BINARY};
};

TEST_F(SupervisorProcessTest, StartsTheTaskAndRecordsItsExit) {
  int fd = output_fd();
  auto pid = client_.launch(request("echo hello from the task; exit 7"), fd, agent_pid_file_);
  ::close(fd);

  ASSERT_TRUE(pid.ok()) << pid.error().message;
  EXPECT_GT(*pid, 0);
  EXPECT_GT(client_.pid(), 0);
  EXPECT_NE(*pid, client_.pid());
  EXPECT_EQ(wait_for_exit_record(), "exit 7\n");
  EXPECT_EQ(read_file(work_ / "task" / "output.log"), "hello from the task\n");
}

TEST_F(SupervisorProcessTest, OneSupervisorServesManyLaunches) {
  pid_t first_supervisor = 0;
  for (int i = 0; i < 3; ++i) {
    fs::remove(work_ / "task" / "exit");
    int fd = output_fd();
    auto pid = client_.launch(request("exit " + std::to_string(i)), fd, agent_pid_file_);
    ::close(fd);
    ASSERT_TRUE(pid.ok()) << pid.error().message;
    if (i == 0) first_supervisor = client_.pid();
    EXPECT_EQ(client_.pid(), first_supervisor);
    EXPECT_EQ(wait_for_exit_record(), "exit " + std::to_string(i) + "\n");
  }
}

TEST_F(SupervisorProcessTest, MissingWorkingDirIsReportedNotHung) {
  LaunchRequest r = request("true");
  r.working_dir = (work_ / "does-not-exist").string();
  int fd = output_fd();

  auto pid = client_.launch(r, fd, agent_pid_file_);
  ::close(fd);

  ASSERT_FALSE(pid.ok());
  EXPECT_THAT(pid.error().message, HasSubstr("does-not-exist"));
  EXPECT_FALSE(fs::exists(work_ / "task" / "exit")) << "no end is recorded for a task that never started";
}

TEST_F(SupervisorProcessTest, ASupervisorThatDiedIsReplacedAtTheNextLaunch) {
  int fd = output_fd();
  ASSERT_TRUE(client_.launch(request("true"), fd, agent_pid_file_).ok());
  ::close(fd);
  pid_t old = client_.pid();
  ::kill(old, SIGKILL);
  ::waitpid(old, nullptr, 0);
  EXPECT_TRUE(client_.on_reaped(old));
  EXPECT_EQ(client_.pid(), 0);

  fs::remove(work_ / "task" / "exit");
  fd = output_fd();
  auto pid = client_.launch(request("exit 3"), fd, agent_pid_file_);
  ::close(fd);

  ASSERT_TRUE(pid.ok()) << pid.error().message;
  EXPECT_NE(client_.pid(), old);
  EXPECT_EQ(wait_for_exit_record(), "exit 3\n");
}

TEST_F(SupervisorProcessTest, EndIsRecordedOnlyOnceWhatTheTaskLeftIsGone) {
  LaunchRequest r = request("sleep 30 & echo started; exit 4");
  int fd = output_fd();
  auto pid = client_.launch(r, fd, agent_pid_file_);
  ::close(fd);
  ASSERT_TRUE(pid.ok()) << pid.error().message;

  EXPECT_EQ(wait_for_exit_record(), "exit 4\n");
  EXPECT_TRUE(find_marked_processes(r.marker).empty()) << "the background sleep outlived its task's end";
}

TEST_F(SupervisorProcessTest, RequestWithANulByteIsRefusedBeforeItIsSent) {
  LaunchRequest r = request("true");
  r.envp.push_back(std::string("X=a\0B=c", 8));
  int fd = output_fd();

  auto pid = client_.launch(r, fd, agent_pid_file_);
  ::close(fd);

  ASSERT_FALSE(pid.ok());
  EXPECT_EQ(pid.error().code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(pid.error().message, HasSubstr("NUL"));
  EXPECT_EQ(client_.pid(), 0) << "no supervisor was needed";
}

}  // namespace
}  // namespace ag::worker
