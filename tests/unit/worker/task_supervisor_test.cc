// The task supervisor: its launch requests on the wire, and a real supervisor process
// starting tasks, recording their ends and reporting what it could not start.
#include "worker/task_supervisor.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <linux/kcmp.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include "worker/async_command.h"
#include "worker/cgroup_pool.h"
#include "worker/fs_fixtures.h"
#include "worker/task_cgroup.h"
#include "worker/task_limits.h"
#include "worker/task_runner.h"
#include "worker/task_start.h"
#include "worker/warm_task.h"

namespace ag::worker {
namespace {

namespace fs = std::filesystem;
using ::ag::testing::read_file;
using ::ag::testing::TempDir;
using ::ag::testing::write_file;
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
  request.limit_cgroups = {"/sys/fs/cgroup/memory/aethergrid/n1/job_1.0.0",
                           "/sys/fs/cgroup/cpu/aethergrid/n1/job_1.0.0"};
  request.memory_cgroup = request.limit_cgroups[0];
  request.limits = {512ll << 20, 1500};

  auto decoded = decode_launch(encode_launch(request));

  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(decoded->cgroup_home, request.cgroup_home);
  EXPECT_EQ(decoded->limit_cgroups, request.limit_cgroups);
  EXPECT_EQ(decoded->memory_cgroup, request.memory_cgroup);
  EXPECT_EQ(decoded->limits.memory_bytes, 512ll << 20);
  EXPECT_EQ(decoded->limits.cpu_millis, 1500);
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

// The task's start resets only what is not at its default here (read from the kernel),
// not every signal.
TEST(ExecArgsTest, TheSignalsToResetAreThoseIgnoredOrCaughtHere) {
  struct sigaction ignore {};
  struct sigaction catch_it {};
  struct sigaction old_pipe {};
  struct sigaction old_usr2 {};
  ignore.sa_handler = SIG_IGN;
  catch_it.sa_handler = [](int) {};
  ASSERT_EQ(::sigaction(SIGPIPE, &ignore, &old_pipe), 0);
  ASSERT_EQ(::sigaction(SIGUSR2, &catch_it, &old_usr2), 0);
  struct sigaction usr1 {};
  ASSERT_EQ(::sigaction(SIGUSR1, nullptr, &usr1), 0);

  const uint64_t reset = signals_not_at_default();

  ::sigaction(SIGPIPE, &old_pipe, nullptr);
  ::sigaction(SIGUSR2, &old_usr2, nullptr);
  auto has = [&](int sig) { return (reset >> (sig - 1)) & 1; };
  EXPECT_EQ(has(SIGPIPE), 1u);
  EXPECT_EQ(has(SIGUSR2), 1u);
  // Left alone when this process has it at its default (as the supervisor has).
  if (usr1.sa_handler == SIG_DFL) {
    EXPECT_EQ(has(SIGUSR1), 0u);
  }
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
  size_t argc_at =
      text.find(std::string("\0"
                            "3\0",
                            3));
  ASSERT_NE(argc_at, std::string::npos);
  text.replace(argc_at, 3,
               std::string("\0"
                           "9\0",
                           3));
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

  // After a task in a pids group under `pids_dir`, the ready-made process the
  // supervisor makes for the next one, once it sits in its spare group; 0 if none.
  pid_t ready_made_after_a_task(const std::string& pids_dir);

  // Launches `command` in a pids group `name` under `pids_dir`, made by the supervisor
  // (as for the agent's host tasks), once the last task's exit record is gone.
  auto launch_in_group(const std::string& pids_dir, const std::string& name, const std::string& command,
                       const std::string& working_dir = "") {
    LaunchRequest r = request(command);
    r.cgroup = pids_dir + "/" + name;
    r.make_groups = true;
    if (!working_dir.empty()) r.working_dir = working_dir;
    fs::remove(work_ / "task" / "exit");
    int fd = output_fd();
    auto pid = client_.launch(r, fd, agent_pid_file_);
    ::close(fd);
    return pid;
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

// A supervisor started by a daemon runs as one (common/scheduling.h): its tasks get the
// usual policy back.
TEST_F(SupervisorProcessTest, TasksOfASupervisorThatYieldsRunUnderTheUsualPolicy) {
  const sched_param normal{};
  ASSERT_EQ(::sched_setscheduler(0, SCHED_BATCH, &normal), 0);  // as the agent runs
  int fd = output_fd();
  // Field 41 of /proc/PID/stat, proc(5): the policy (0 SCHED_OTHER, 3 SCHED_BATCH), of `cut` itself.
  auto pid = client_.launch(request("cut -d' ' -f41 /proc/self/stat"), fd, agent_pid_file_);
  ::close(fd);
  ASSERT_EQ(::sched_setscheduler(0, SCHED_OTHER, &normal), 0);

  ASSERT_TRUE(pid.ok()) << pid.error().message;
  EXPECT_EQ(::sched_getscheduler(client_.pid()), SCHED_BATCH) << "the supervisor yields as its agent does";
  EXPECT_EQ(wait_for_exit_record(), "exit 0\n");
  EXPECT_EQ(read_file(work_ / "task" / "output.log"), std::to_string(SCHED_OTHER) + "\n");
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

TEST_F(SupervisorProcessTest, TheTaskRunsAsItsAccountWithEverySignalAtItsDefault) {
  if (::geteuid() != 0) GTEST_SKIP() << "switching accounts needs root";
  ::chmod(work_.path().c_str(), 0777);
  ::chmod((work_ / "task").c_str(), 0777);
  LaunchRequest r = request("cat /proc/self/status; exit 3");
  r.run_as = LaunchRequest::RunAs{65534, 65534, {44, 109}};
  int fd = output_fd();
  auto pid = client_.launch(r, fd, agent_pid_file_);
  ::close(fd);

  ASSERT_TRUE(pid.ok()) << pid.error().message;
  EXPECT_EQ(wait_for_exit_record(), "exit 3\n");
  const std::string status = read_file(work_ / "task" / "output.log");
  EXPECT_THAT(status, HasSubstr("Uid:\t65534\t65534\t65534\t65534"));
  EXPECT_THAT(status, HasSubstr("Gid:\t65534\t65534\t65534\t65534"));
  EXPECT_THAT(status, HasSubstr("Groups:\t44 109"));
  EXPECT_THAT(status, HasSubstr("SigBlk:\t0000000000000000")) << "the supervisor's blocked signals are not the task's";
  EXPECT_THAT(status, HasSubstr("SigCgt:\t0000000000000000")) << "no handler of the supervisor's is the task's";
  EXPECT_THAT(status, HasSubstr("SigIgn:\t0000000000000000")) << "nothing the supervisor ignores is ignored";
}

TEST_F(SupervisorProcessTest, AWorkingDirTheAccountCannotEnterIsReportedAndNothingStarts) {
  if (::geteuid() != 0) GTEST_SKIP() << "switching accounts needs root";
  ::chmod((work_ / "task").c_str(), 0777);
  const fs::path closed = work_ / "closed";
  fs::create_directories(closed);
  ::chmod(closed.c_str(), 0700);
  LaunchRequest r = request("true");
  r.working_dir = closed.string();
  r.run_as = LaunchRequest::RunAs{65534, 65534, {}};
  int fd = output_fd();
  auto pid = client_.launch(r, fd, agent_pid_file_);
  ::close(fd);

  ASSERT_FALSE(pid.ok());
  EXPECT_THAT(pid.error().message, HasSubstr("as uid 65534 in " + closed.string() + ": chdir: Permission denied"));
  EXPECT_FALSE(fs::exists(work_ / "task" / "exit")) << "no end is recorded for a task that never started";
}

// A simple command runs without the shell (worker/simple_command.h) and behaves as under
// it (each expectation is what `/bin/sh -c` gives): PATH searched in order past what
// cannot run, the shell's own errors and exit codes where nothing can, a program without "#!" run as a script, PWD set,
// words whole.
TEST_F(SupervisorProcessTest, ASimpleCommandBehavesAsUnderTheShell) {
  const fs::path first = work_ / "bin1", second = work_ / "bin2";
  fs::create_directories(first);
  fs::create_directories(second);
  write_file(first / "prog", "#!/bin/sh\necho first\n", fs::perms(0644));  // not executable: skipped
  write_file(second / "prog", "#!/bin/sh\necho second \"$@\"\n", fs::perms(0755));
  write_file(first / "only-readable", "#!/bin/sh\n", fs::perms(0644));
  write_file(first / "no-hash-bang", "echo run as a script by $0\n", fs::perms(0755));
  auto run = [&](const std::string& command) {
    fs::remove(work_ / "task" / "exit");
    fs::remove(work_ / "task" / "output.log");
    LaunchRequest r = request(command);
    r.envp = {"PATH=" + first.string() + ":" + second.string() + ":/usr/bin:/bin", "PWD=/nowhere",
              "AG_TASK_MARKER=" + r.marker};
    int fd = output_fd();
    auto pid = client_.launch(r, fd, agent_pid_file_);
    ::close(fd);
    EXPECT_TRUE(pid.ok()) << command;
    std::string exit = wait_for_exit_record();
    return exit + read_file(work_ / "task" / "output.log");
  };
  EXPECT_EQ(run("prog 'a  b' c"), "exit 0\nsecond a  b c\n");
  EXPECT_EQ(run("exec sh -c 'echo \"$PWD|$1|$2\"' x 'a b' c"), "exit 0\n" + work_.path().string() + "|a b|c\n");
  EXPECT_EQ(run("no-such-program-here x"), "exit 127\n/bin/sh: 1: no-such-program-here: not found\n");
  // What dash says and exits with (127 here too).
  EXPECT_EQ(run("only-readable"), "exit 127\n/bin/sh: 1: only-readable: Permission denied\n");
  EXPECT_EQ(run("no-hash-bang"), "exit 0\nrun as a script by " + (first / "no-hash-bang").string() + "\n");
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

// The control group of `pid` in the v1 hierarchy of `controller` ("" for v2's line),
// relative to its mount.
std::string cgroup_of(pid_t pid, const std::string& controller) {
  std::istringstream lines(read_file("/proc/" + std::to_string(pid) + "/cgroup"));
  for (std::string line; std::getline(lines, line);) {
    size_t first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    std::string controllers = "," + line.substr(first + 1, second - first - 1) + ",";
    if (controller.empty() ? line.substr(first + 1, second - first - 1).empty()
                           : controllers.find("," + controller + ",") != std::string::npos) {
      return line.substr(second + 1);
    }
  }
  return "";
}

// The supervisor's children named `comm`.
std::vector<pid_t> children_named(pid_t parent, const std::string& comm) {
  std::vector<pid_t> out;
  const std::string self = std::to_string(parent);
  std::istringstream children(read_file("/proc/" + self + "/task/" + self + "/children"));
  for (pid_t pid = 0; children >> pid;) {
    std::string name = read_file("/proc/" + std::to_string(pid) + "/comm");
    if (name == comm + "\n") out.push_back(pid);
  }
  return out;
}

// 1 when the two processes share one address space, 0 when not, -1 when the kernel
// cannot tell (no kcmp).
int shares_memory_with(pid_t a, pid_t b) {
  const long same = ::syscall(SYS_kcmp, a, b, KCMP_VM, 0, 0);
  return same < 0 ? -1 : same == 0 ? 1 : 0;
}

// A folder for the test's groups in a mounted cgroup hierarchy (made, removed with
// everything below it at the end), or "" where the test may not make one.
class CgroupDir {
 public:
  explicit CgroupDir(const std::string& mount) {
    std::string dir = mount + "/ag-supervisor-test-" + std::to_string(::getpid());
    if (::access((mount + "/cgroup.procs").c_str(), W_OK) == 0 && ::mkdir(dir.c_str(), 0755) == 0) path_ = dir;
  }
  ~CgroupDir() {
    for (int i = 0; i < 200 && !path_.empty() && !remove_cgroup(path_); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  const std::string& path() const { return path_; }
  std::string relative(const std::string& mount) const { return path_.substr(mount.size()); }

 private:
  std::string path_;
};

bool wait_for(const std::function<bool()>& done, int ms = 5000) {
  for (int waited = 0; waited < ms; waited += 10) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

pid_t SupervisorProcessTest::ready_made_after_a_task(const std::string& pids_dir) {
  auto first = launch_in_group(pids_dir, "first", "exit 0");
  if (!first.ok() || wait_for_exit_record() != "exit 0\n") return 0;
  pid_t warm = 0;
  const bool found = wait_for([&] {
    auto made = children_named(client_.pid(), "ag-warm-task");
    warm = made.empty() ? 0 : made[0];
    return warm && cgroup_of(warm, "pids").find("/warm.") != std::string::npos;
  });
  return found ? warm : 0;
}

// A task's group goes with the groups a container engine made below it; one a process
// still holds stays (EBUSY, as its caller retries) until the process has left.
TEST(RemoveCgroupTest, GoesWithTheGroupsBelowItAndStaysWhileAProcessHoldsIt) {
  // v1's pids hierarchy, or the unified one.
  const std::string mount = fs::exists("/sys/fs/cgroup/cgroup.controllers") ? "/sys/fs/cgroup" : "/sys/fs/cgroup/pids";
  CgroupDir root(mount);
  if (root.path().empty()) GTEST_SKIP() << "needs a writable cgroup hierarchy";
  const std::string task = root.path() + "/task", below = task + "/engine", deeper = below + "/ctr";
  ASSERT_EQ(::mkdir(task.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(below.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(deeper.c_str(), 0755), 0);
  EXPECT_TRUE(remove_cgroup(task));
  EXPECT_FALSE(fs::exists(task));
  EXPECT_TRUE(remove_cgroup(task));  // gone already

  ASSERT_EQ(::mkdir(task.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(below.c_str(), 0755), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (!join_cgroup(below.c_str())) ::_exit(1);
    ::pause();
    ::_exit(0);
  }
  struct Reaper {
    pid_t pid;
    void now() {
      if (pid > 0) ::kill(pid, SIGKILL), ::waitpid(pid, nullptr, 0);
      pid = 0;
    }
    ~Reaper() { now(); }
  } reaper{child};
  ASSERT_TRUE(wait_for([&] { return read_file(below + "/cgroup.procs") == std::to_string(child) + "\n"; }));
  errno = 0;
  EXPECT_FALSE(remove_cgroup(task));
  EXPECT_EQ(errno, EBUSY);
  EXPECT_TRUE(fs::exists(below));
  reaper.now();
  EXPECT_TRUE(wait_for([&] { return remove_cgroup(task); }));
  EXPECT_FALSE(fs::exists(task));
}

// On cgroup v1, the supervisor keeps a process ready in spare groups: the next task of
// the same kind is that process, renamed into its groups with its caps, and no process
// moves on the launch path. Whatever is not used goes when the agent does.
TEST_F(SupervisorProcessTest, OnCgroupV1TheNextTaskIsTheReadyMadeProcessInItsOwnGroups) {
  const std::string pids_mount = "/sys/fs/cgroup/pids", cpu_mount = "/sys/fs/cgroup/cpu";
  CgroupDir pids(pids_mount), cpu(cpu_mount);
  if (pids.path().empty() || cpu.path().empty() || on_cgroup2(pids.path())) {
    GTEST_SKIP() << "needs writable cgroup v1 pids and cpu hierarchies";
  }
  auto groups = [&](const std::string& name, LaunchRequest* r) {
    r->cgroup = pids.path() + "/" + name;
    r->limit_cgroups = {cpu.path() + "/" + name};
    r->limits.cpu_millis = 500;
  };
  // The first task: the supervisor makes its groups (as for the agent's host tasks).
  LaunchRequest first = request("sleep 30");
  groups("first", &first);
  first.make_groups = true;
  int fd = output_fd();
  auto first_pid = client_.launch(first, fd, agent_pid_file_);
  ::close(fd);
  ASSERT_TRUE(first_pid.ok()) << first_pid.error().message;
  EXPECT_EQ(cgroup_of(static_cast<pid_t>(*first_pid), "cpu"), cpu.relative(cpu_mount) + "/first");
  EXPECT_EQ(read_file(first.limit_cgroups[0] + "/cpu.cfs_quota_us"), "50000\n");
  ::kill(static_cast<pid_t>(*first_pid), SIGKILL);
  const pid_t supervisor = client_.pid();
  pid_t warm = 0;
  ASSERT_TRUE(wait_for([&] {
    auto found = children_named(supervisor, "ag-warm-task");
    warm = found.empty() ? 0 : found[0];
    return warm && cgroup_of(warm, "pids").find("/warm.") != std::string::npos &&
           cgroup_of(warm, "cpu").find("/warm.") != std::string::npos;
  })) << "no ready-made process sits in spare groups";
  if (shares_memory_with(warm, supervisor) >= 0) {
    EXPECT_EQ(shares_memory_with(warm, supervisor), 1) << "the ready-made process shares the supervisor's memory";
  }
  EXPECT_EQ(wait_for_exit_record(), "signal 9\n");

  // The second: its groups made as for a container's client (by the agent, caps
  // included) give way to the spares.
  fs::remove(work_ / "task" / "exit");
  LaunchRequest second = request("sleep 30");
  groups("second", &second);
  ASSERT_EQ(create_task_cgroup(pids.path(), "second"), second.cgroup);
  ASSERT_EQ(::mkdir(second.limit_cgroups[0].c_str(), 0755), 0);
  ASSERT_EQ(write_v1_caps(second.limit_cgroups[0], second.limits), "");
  fd = output_fd();
  auto pid = client_.launch(second, fd, agent_pid_file_);
  ::close(fd);

  ASSERT_TRUE(pid.ok()) << pid.error().message;
  EXPECT_EQ(*pid, warm) << "the task is the ready-made process";
  EXPECT_EQ(cgroup_of(warm, "pids"), pids.relative(pids_mount) + "/second");
  EXPECT_EQ(cgroup_of(warm, "cpu"), cpu.relative(cpu_mount) + "/second");
  EXPECT_EQ(read_file(second.limit_cgroups[0] + "/cpu.cfs_quota_us"), "50000\n") << "the caps went with it";
  EXPECT_NE(read_file("/proc/" + std::to_string(warm) + "/comm"), "ag-warm-task\n") << "it ran the command";
  EXPECT_NE(shares_memory_with(warm, supervisor), 1) << "the task has memory of its own";
  EXPECT_THAT(cgroup_pids(second.cgroup), ::testing::Contains(warm));
  EXPECT_EQ(cgroup_of(supervisor, "pids"), cgroup_of(::getpid(), "pids"))
      << "the supervisor stays where it was started, in no task's group";

  // The agent goes: the unused process and its spare groups go; the task stays.
  ::kill(warm, SIGKILL);
  EXPECT_EQ(wait_for_exit_record(), "signal 9\n");
  client_.~SupervisorClient();
  new (&client_) SupervisorClient(AG_BINARY);
  EXPECT_TRUE(wait_for([&] { return ::waitpid(supervisor, nullptr, WNOHANG) == supervisor; })) << "the supervisor left";
  for (const auto& dir : {pids.path(), cpu.path()}) {
    for (const auto& entry : fs::directory_iterator(dir)) {
      EXPECT_EQ(entry.path().filename().string().rfind("warm.", 0), std::string::npos) << entry.path();
    }
  }
}

// A ready-made process that cannot become its task (a working dir that is not there)
// says why, is gone, and the next launch starts as usual.
TEST_F(SupervisorProcessTest, OnCgroupV1AReadyMadeProcessThatCannotStartTheTaskSaysWhy) {
  const std::string pids_mount = "/sys/fs/cgroup/pids";
  CgroupDir pids(pids_mount);
  if (pids.path().empty() || on_cgroup2(pids.path())) GTEST_SKIP() << "needs a writable cgroup v1 pids hierarchy";
  auto launch = [&](const std::string& name, const std::string& command, const std::string& working_dir) {
    return launch_in_group(pids.path(), name, command, working_dir);
  };
  const pid_t warm = ready_made_after_a_task(pids.path());
  ASSERT_GT(warm, 0) << "no ready-made process sits in a spare group";
  const pid_t supervisor = client_.pid();

  auto failed = launch("second", "exit 0", (work_ / "does-not-exist").string());
  ASSERT_FALSE(failed.ok());
  EXPECT_THAT(failed.error().message, HasSubstr("does-not-exist"));
  EXPECT_FALSE(fs::exists(work_ / "task" / "exit")) << "no end is recorded for a task that never started";
  EXPECT_FALSE(fs::exists("/proc/" + std::to_string(warm))) << "the process is gone, reaped";

  auto third = launch("third", "exit 5", "");
  ASSERT_TRUE(third.ok()) << third.error().message;
  EXPECT_EQ(client_.pid(), supervisor);
  EXPECT_EQ(wait_for_exit_record(), "exit 5\n");
  // The supervisor leaves with its next ready-made process, before the groups go.
  client_.~SupervisorClient();
  new (&client_) SupervisorClient(AG_BINARY);
  EXPECT_TRUE(wait_for([&] { return ::waitpid(supervisor, nullptr, WNOHANG) == supervisor; })) << "the supervisor left";
}

// A signal sent to the ready-made process while it waits (the supervisor ignores
// SIGTERM, SIGHUP and SIGINT; the waiting process blocks them, so they stay pending) is
// dropped when it becomes its task, never delivered to the task.
TEST_F(SupervisorProcessTest, OnCgroupV1ASignalSentToTheReadyMadeProcessNeverReachesItsTask) {
  const std::string pids_mount = "/sys/fs/cgroup/pids";
  CgroupDir pids(pids_mount);
  if (pids.path().empty() || on_cgroup2(pids.path())) GTEST_SKIP() << "needs a writable cgroup v1 pids hierarchy";
  auto launch = [&](const std::string& name, const std::string& command) {
    return launch_in_group(pids.path(), name, command);
  };
  const pid_t warm = ready_made_after_a_task(pids.path());
  ASSERT_GT(warm, 0) << "no ready-made process sits in a spare group";
  const pid_t supervisor = client_.pid();
  for (int sig : {SIGTERM, SIGHUP, SIGINT}) ASSERT_EQ(::kill(warm, sig), 0);

  auto second = launch("second", "sleep 0.2; exit 4");
  ASSERT_TRUE(second.ok()) << second.error().message;
  EXPECT_EQ(*second, warm) << "the task is the ready-made process";
  EXPECT_EQ(wait_for_exit_record(), "exit 4\n") << "the task ran to its end";
  client_.~SupervisorClient();
  new (&client_) SupervisorClient(AG_BINARY);
  EXPECT_TRUE(wait_for([&] { return ::waitpid(supervisor, nullptr, WNOHANG) == supervisor; })) << "the supervisor left";
}

// Asking whether the ready-made process is ready must not wake it: a wake-up that finds
// nothing to do queues it on whichever CPU it last ran on, busy or not, and there it
// stays when its launch comes (a gang's second rank waited out the first rank's exec).
TEST(WarmTaskTest, OnCgroupV1FindingTheProcessReadyLeavesItAsleep) {
  CgroupDir pids("/sys/fs/cgroup/pids");
  if (pids.path().empty() || on_cgroup2(pids.path())) GTEST_SKIP() << "needs a writable cgroup v1 pids hierarchy";
  CgroupPool pool;
  auto warm = WarmTask::make({pids.path()}, {}, pool);
  ASSERT_TRUE(warm) << "no ready-made process";
  const std::string proc = "/proc/" + std::to_string(warm->pid());
  // Waiting for its task: blocked in recvmsg, in its spare group.
  ASSERT_TRUE(wait_for([&] {
    return read_file(proc + "/syscall").rfind(std::to_string(SYS_recvmsg) + " ", 0) == 0 &&
           cgroup_of(warm->pid(), "pids").find("/warm.") != std::string::npos;
  })) << read_file(proc + "/syscall");
  auto switches = [&] {
    std::istringstream status(read_file(proc + "/status"));
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("voluntary_ctxt_switches:", 0) == 0) return std::stol(line.substr(line.find(':') + 1));
    }
    return -1L;
  };
  const long asleep = switches();
  ASSERT_GE(asleep, 0);
  EXPECT_TRUE(warm->ready(1000));
  EXPECT_TRUE(warm->ready(1000)) << "asked again";
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(switches(), asleep) << "the process was woken";
  warm->release();
}

// A task that ends while its folder's disk is full: its end is recorded once there is
// room, never as a record the agent cannot read, and never lost.
TEST_F(SupervisorProcessTest, AnEndThatCannotBeRecordedOnAFullDiskIsRecordedOnceThereIsRoom) {
  if (::geteuid() != 0) GTEST_SKIP() << "mounting a small file system needs root";
  TempDir small;
  if (::mount("tmpfs", small.path().c_str(), "tmpfs", 0, "size=64k") != 0) GTEST_SKIP() << "cannot mount a tmpfs";
  struct Unmount {
    std::string path;
    ~Unmount() { ::umount2(path.c_str(), MNT_DETACH); }
  } unmount{small.path().string()};
  const fs::path dir = small.path() / "task";
  fs::create_directories(dir);
  const int out = ::open((dir / "output.log").c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  ASSERT_GE(out, 0);
  {
    const int filler = ::open((small.path() / "filler").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    ASSERT_GE(filler, 0);
    const std::string block(4096, 'x');
    while (::write(filler, block.data(), block.size()) > 0) {
    }
    ::close(filler);
  }
  LaunchRequest r = request("exit 3");
  r.task_dir = dir.string();
  auto pid = client_.launch(r, out, agent_pid_file_);
  ::close(out);
  ASSERT_TRUE(pid.ok()) << pid.error().message;
  ASSERT_TRUE(wait_for([&] { return ::kill(static_cast<pid_t>(*pid), 0) != 0; })) << "the task ended";
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(fs::exists(dir / "exit")) << "no record while the disk is full (a partial one would read as none)";

  fs::remove(small.path() / "filler");
  EXPECT_TRUE(wait_for([&] { return fs::exists(dir / "exit"); })) << "the end recorded once there is room";
  EXPECT_EQ(read_file(dir / "exit"), "exit 3\n");
  EXPECT_FALSE(fs::exists(dir / "exit.tmp"));
}

// A worker started under SCHED_IDLE by an account that cannot leave it (no
// CAP_SYS_NICE) still starts its helper commands: they keep its policy rather than fail
// to reset it.
TEST(CleanSpawnTest, AnAccountHeldToTheIdlePolicyStillStartsCommands) {
  if (::geteuid() != 0) GTEST_SKIP() << "dropping to another account needs root";
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const sched_param none{};
    if (::sched_setscheduler(0, SCHED_IDLE, &none) != 0) ::_exit(90);
    if (::setgroups(0, nullptr) != 0 || ::setresgid(65534, 65534, 65534) != 0 ||
        ::setresuid(65534, 65534, 65534) != 0) {
      ::_exit(91);
    }
    if (::sched_setscheduler(0, SCHED_OTHER, &none) == 0) ::_exit(92);  // it could leave: no case to test
    int out = -1;
    std::string error;
    const pid_t command = spawn_with_output({"/bin/true"}, &out, &error);
    if (command <= 0) ::_exit(1);
    int status = 0;
    ::waitpid(command, &status, 0);
    ::_exit(WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 2);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 92) GTEST_SKIP() << "this kernel lets the account leave SCHED_IDLE";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: the command could not start; 2: it failed; 90/91: set-up";
}

// A supervisor started with a standard descriptor closed can receive the task's output
// file as that descriptor: the task's stdout and stderr still go to it.
TEST(BecomeTaskTest, AnOutputFileThatArrivedAsAStandardDescriptorGetsAllTheOutput) {
  TempDir dir;
  const std::string out = (dir.path() / "out").string();
  for (int standard : {0, 1, 2}) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(standard);
      const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd != standard) ::_exit(90);
      LaunchRequest r;
      r.working_dir = dir.path().string();
      r.argv = {"/bin/sh", "-c", "echo out; echo err >&2"};
      r.envp = {"PATH=/usr/bin:/bin"};
      const ExecArgs args(r);
      StartReport report;
      become_task(r, args, fd, report);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "output on descriptor " << standard;
    EXPECT_EQ(read_file(out), "out\nerr\n") << "output on descriptor " << standard;
  }
}

ino_t inode_of(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

// The spares under `dir`, by inode.
std::map<ino_t, std::string> spares_in(const std::string& dir) {
  std::map<ino_t, std::string> found;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (is_spare_name(entry.path().filename().string())) found[inode_of(entry.path().string())] = entry.path();
  }
  return found;
}

// A kept group is the next one had in its folder, under its new name; a folder keeps a
// few at most; spares come from the kept ones first; and a supervisor's leftovers go
// once it is gone.
TEST(CgroupPoolTest, KeepsEmptiedGroupsForTheNextTasks) {
  CgroupDir pids("/sys/fs/cgroup/pids");
  if (pids.path().empty() || on_cgroup2(pids.path())) GTEST_SKIP() << "needs a writable cgroup v1 pids hierarchy";
  const std::string dir = pids.path();
  // A spare a supervisor that is gone left: removed the first time the folder is used.
  const pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  ::waitpid(gone, nullptr, 0);
  const std::string stale = dir + "/warm." + std::to_string(gone) + ".1";
  ASSERT_EQ(::mkdir(stale.c_str(), 0755), 0);

  CgroupPool pool(1);
  EXPECT_FALSE(pool.take(dir + "/first").has_value()) << "nothing is kept yet";
  ASSERT_EQ(create_task_cgroup(dir, "first"), dir + "/first");
  ASSERT_EQ(create_task_cgroup(dir, "second"), dir + "/second");
  const ino_t first = inode_of(dir + "/first");

  EXPECT_TRUE(pool.keep(dir + "/first", "its caps"));
  EXPECT_FALSE(fs::exists(stale)) << "the stale spare is gone";
  EXPECT_FALSE(fs::exists(dir + "/first"));
  EXPECT_EQ(spares_in(dir).count(first), 1u) << "kept under a spare's name";
  EXPECT_FALSE(pool.keep(dir + "/second")) << "one is enough for this pool";
  EXPECT_TRUE(fs::exists(dir + "/second")) << "what is not kept stays for its caller to remove";
  EXPECT_FALSE(pool.take(dir + "/second").has_value()) << "a group that is there already is not replaced";
  EXPECT_EQ(pool.kept(dir), 1u);

  EXPECT_EQ(pool.take(dir + "/third"), "its caps") << "what was written on it";
  EXPECT_EQ(inode_of(dir + "/third"), first) << "the kept group, renamed";
  EXPECT_EQ(pool.kept(dir), 0u);
  EXPECT_TRUE(spares_in(dir).empty());

  // Spares for a ready-made process: the kept one first, then new ones.
  ASSERT_TRUE(remove_cgroup(dir + "/second"));
  EXPECT_TRUE(pool.keep(dir + "/third"));
  const std::string kept = pool.spare(dir);
  EXPECT_EQ(inode_of(kept), first);
  const std::string made = pool.spare(dir);
  ASSERT_FALSE(made.empty());
  EXPECT_NE(inode_of(made), first);
  EXPECT_TRUE(is_spare_name(fs::path(made).filename().string()));

  EXPECT_TRUE(pool.keep(kept));
  pool.clear();
  EXPECT_FALSE(fs::exists(kept)) << "cleared";
  EXPECT_TRUE(remove_cgroup(made));
}

// A task's groups made from kept ones get the task's caps, unless the kept group has
// them already.
TEST(CgroupPoolTest, AKeptGroupHadForATaskGetsItsCapsUnlessItHasThemAlready) {
  CgroupDir pids("/sys/fs/cgroup/pids"), cpu("/sys/fs/cgroup/cpu");
  if (pids.path().empty() || cpu.path().empty() || on_cgroup2(pids.path())) {
    GTEST_SKIP() << "needs writable cgroup v1 pids and cpu hierarchies";
  }
  CgroupPool pool;
  auto request = [&](const std::string& name, int64_t cpu_millis) {
    LaunchRequest r;
    r.cgroup = pids.path() + "/" + name;
    r.limit_cgroups = {cpu.path() + "/" + name};
    r.limits.cpu_millis = cpu_millis;
    r.make_groups = true;
    return r;
  };
  const LaunchRequest first = request("first", 500);
  ASSERT_EQ(make_task_groups(first, &pool), "");
  EXPECT_EQ(read_file(first.limit_cgroups[0] + "/cpu.cfs_quota_us"), "50000\n");
  const ino_t capped = inode_of(first.limit_cgroups[0]);
  for (const auto& group : {first.cgroup, first.limit_cgroups[0]})
    ASSERT_TRUE(pool.keep(group, v1_caps_key(first.limits)));

  const LaunchRequest other = request("other", 1500);
  ASSERT_EQ(make_task_groups(other, &pool), "");
  EXPECT_EQ(inode_of(other.limit_cgroups[0]), capped) << "the kept group";
  EXPECT_EQ(read_file(other.limit_cgroups[0] + "/cpu.cfs_quota_us"), "150000\n") << "with this task's caps";

  // Kept saying it has 1.5 CPUs: a task with those caps finds them written (the quota
  // written behind the pool's back shows that nothing wrote it again).
  for (const auto& group : {other.cgroup, other.limit_cgroups[0]})
    ASSERT_TRUE(pool.keep(group, v1_caps_key(other.limits)));
  ASSERT_EQ(spares_in(cpu.path()).size(), 1u);
  write_file(spares_in(cpu.path()).begin()->second + "/cpu.cfs_quota_us", "70000");
  const LaunchRequest same = request("same", 1500);
  ASSERT_EQ(make_task_groups(same, &pool), "");
  EXPECT_EQ(inode_of(same.limit_cgroups[0]), capped);
  EXPECT_EQ(read_file(same.limit_cgroups[0] + "/cpu.cfs_quota_us"), "70000\n");
  for (const auto& group : {same.cgroup, same.limit_cgroups[0]}) EXPECT_TRUE(remove_cgroup(group));
}

// On cgroup v1, the groups the supervisor made for a task that ran as an account of its
// own are kept once it has ended (its memory group excepted: the kernel counts OOM kills
// per group) and are gone with the supervisor.
TEST_F(SupervisorProcessTest, TheGroupsOfAnEndedTaskAreKeptForTheNextOnes) {
  if (::geteuid() != 0) GTEST_SKIP() << "switching accounts needs root";
  const std::string pids_mount = "/sys/fs/cgroup/pids", cpu_mount = "/sys/fs/cgroup/cpu";
  CgroupDir pids(pids_mount), cpu(cpu_mount), memory("/sys/fs/cgroup/memory");
  if (pids.path().empty() || cpu.path().empty() || memory.path().empty() || on_cgroup2(pids.path())) {
    GTEST_SKIP() << "needs writable cgroup v1 pids, cpu and memory hierarchies";
  }
  ::chmod(work_.path().c_str(), 0777);
  ::chmod((work_ / "task").c_str(), 0777);
  LaunchRequest r = request("sleep 0.3");
  r.run_as = LaunchRequest::RunAs{65534, 65534, {}};
  r.cgroup = pids.path() + "/first";
  r.memory_cgroup = memory.path() + "/first";
  r.limit_cgroups = {cpu.path() + "/first", r.memory_cgroup};
  r.limits.cpu_millis = 500;
  r.limits.memory_bytes = 256 << 20;
  r.make_groups = true;
  int fd = output_fd();
  auto pid = client_.launch(r, fd, agent_pid_file_);
  ::close(fd);
  ASSERT_TRUE(pid.ok()) << pid.error().message;
  const ino_t tracking = inode_of(r.cgroup), capped = inode_of(r.limit_cgroups[0]),
              memory_group = inode_of(r.memory_cgroup);
  ASSERT_NE(tracking, 0u) << "the task ended before its groups were seen";
  EXPECT_EQ(read_file(r.limit_cgroups[0] + "/cpu.cfs_quota_us"), "50000\n");

  EXPECT_EQ(wait_for_exit_record(), "exit 0\n");
  EXPECT_TRUE(wait_for([&] { return !fs::exists(r.cgroup) && !fs::exists(r.memory_cgroup); }));
  EXPECT_EQ(spares_in(pids.path()).count(tracking), 1u) << "its tracking group is kept";
  EXPECT_EQ(spares_in(cpu.path()).count(capped), 1u) << "its cpu group is kept";
  EXPECT_EQ(spares_in(memory.path()).count(memory_group), 0u) << "its memory group is not";

  // The agent goes, and the supervisor with it: nothing it kept stays.
  const pid_t supervisor = client_.pid();
  client_.~SupervisorClient();
  new (&client_) SupervisorClient(AG_BINARY);
  EXPECT_TRUE(wait_for([&] { return ::waitpid(supervisor, nullptr, WNOHANG) == supervisor; })) << "the supervisor left";
  for (const auto& dir : {pids.path(), cpu.path(), memory.path()}) EXPECT_TRUE(spares_in(dir).empty()) << dir;
}

TEST_F(SupervisorProcessTest, GroupsThatCannotBeMadeAreReportedAndNothingStarts) {
  CgroupDir pids("/sys/fs/cgroup/pids");
  if (pids.path().empty() || on_cgroup2(pids.path())) GTEST_SKIP() << "needs a writable cgroup v1 pids hierarchy";
  LaunchRequest r = request("echo must not run");
  r.cgroup = pids.path() + "/missing-parent/task";
  r.make_groups = true;
  int fd = output_fd();

  auto pid = client_.launch(r, fd, agent_pid_file_);
  ::close(fd);

  ASSERT_FALSE(pid.ok());
  EXPECT_THAT(pid.error().message, HasSubstr("cannot create the task's control group " + r.cgroup));
  EXPECT_EQ(read_file(work_ / "task" / "output.log"), "");
}

// On cgroup v2 a task is born in its group: neither the supervisor nor anything else
// steps into it.
TEST_F(SupervisorProcessTest, OnCgroupV2TheTaskIsBornInItsGroup) {
  std::string mount = fs::exists("/sys/fs/cgroup/cgroup.controllers") ? "/sys/fs/cgroup" : "/sys/fs/cgroup/unified";
  CgroupDir v2(mount);
  if (v2.path().empty() || !on_cgroup2(v2.path())) GTEST_SKIP() << "needs a writable cgroup v2 hierarchy";
  for (const char* name : {"one", "two"}) {
    fs::remove(work_ / "task" / "exit");
    LaunchRequest r = request("sleep 30");
    r.cgroup = create_task_cgroup(v2.path(), name);
    ASSERT_FALSE(r.cgroup.empty());
    int fd = output_fd();
    auto pid = client_.launch(r, fd, agent_pid_file_);
    ::close(fd);
    ASSERT_TRUE(pid.ok()) << pid.error().message;
    EXPECT_EQ(cgroup_of(static_cast<pid_t>(*pid), ""), v2.relative(mount) + "/" + name);
    EXPECT_TRUE(children_named(client_.pid(), "ag-warm-task").empty()) << "none is made on v2";
    ::kill(static_cast<pid_t>(*pid), SIGKILL);
    EXPECT_EQ(wait_for_exit_record(), "signal 9\n");
  }
}

}  // namespace
}  // namespace ag::worker
