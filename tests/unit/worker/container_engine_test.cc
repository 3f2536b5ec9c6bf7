// Containers on a worker: the engine command line of a task, its GPUs, the image's
// environment.
#include "worker/container_engine.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "worker/async_command.h"

namespace ag::worker {
namespace {

using ::testing::ElementsAre;

ContainerRun sample_run() {
  ContainerRun run;
  run.engine = {"podman", "/usr/bin/podman", "4.3.1"};
  run.name = container_name("job_abc", 2, 1);
  run.node_id = "node_1";
  run.image = "registry.example/team/train:1.4";
  run.entrypoint = "python train.py --lr 0.1";
  run.working_dir = "/var/lib/ag/work/job_abc.2.1";
  run.env_file = "/var/lib/ag/tasks/job_abc.2.1/container.env";
  run.mounts = {{"/data/imagenet", "/data", true}, {"/scratch", "/scratch", false}};
  run.cgroup_parent = "/aethergrid/node_1/job_abc.2.1";
  run.nofile_soft = 1024;
  run.nofile_hard = 20000;
  run.nproc = 32768;
  return run;
}

// The value after `flag` each time it appears.
std::vector<std::string> values_of(const std::vector<std::string>& args, const std::string& flag) {
  std::vector<std::string> out;
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == flag) out.push_back(args[i + 1]);
  }
  return out;
}

bool has(const std::vector<std::string>& args, const std::string& arg) {
  return std::find(args.begin(), args.end(), arg) != args.end();
}

TEST(ContainerRunTest, RunsTheEntrypointInTheImageAsAHostTaskWouldRun) {
  auto args = container_run_args(sample_run());

  EXPECT_EQ(args[0], "/usr/bin/podman");
  EXPECT_EQ(args[1], "run");
  // Image, then the command through a shell, last.
  ASSERT_GE(args.size(), 4u);
  EXPECT_THAT(std::vector<std::string>(args.end() - 4, args.end()),
              ElementsAre("registry.example/team/train:1.4", "/bin/sh", "-c", "python train.py --lr 0.1"));
  EXPECT_THAT(values_of(args, "--name"), ElementsAre("ag-job_abc-2-1"));
  EXPECT_THAT(values_of(args, "--network"), ElementsAre("host"));
  EXPECT_THAT(values_of(args, "--ipc"), ElementsAre("host"));
  EXPECT_THAT(values_of(args, "--pull"), ElementsAre("never"));
  EXPECT_TRUE(has(args, "--rm"));
  EXPECT_TRUE(has(args, "--init"));
  EXPECT_TRUE(has(args, "--replace"));
  EXPECT_FALSE(has(args, "--privileged"));
  EXPECT_THAT(values_of(args, "--ulimit"), ElementsAre("nofile=1024:20000", "nproc=32768:32768"));
  EXPECT_THAT(values_of(args, "--env-file"), ElementsAre("/var/lib/ag/tasks/job_abc.2.1/container.env"));
  EXPECT_THAT(values_of(args, "--volume"), ElementsAre("/var/lib/ag/work/job_abc.2.1:/var/lib/ag/work/job_abc.2.1"));
  EXPECT_THAT(values_of(args, "--workdir"), ElementsAre("/var/lib/ag/work/job_abc.2.1"));
  EXPECT_THAT(values_of(args, "--mount"), ElementsAre("type=bind,source=/data/imagenet,target=/data,readonly=true",
                                                      "type=bind,source=/scratch,target=/scratch"));
  EXPECT_THAT(values_of(args, "--label"), ElementsAre("aethergrid.node=node_1"));
}

TEST(ContainerRunTest, TheContainerGoesUnderTheTasksGroupElseTheEngineCapsIt) {
  ContainerRun run = sample_run();
  run.memory_bytes = int64_t{4} << 30;
  run.cpu_millis = 1500;
  auto args = container_run_args(run);
  EXPECT_THAT(values_of(args, "--cgroup-parent"), ElementsAre("/aethergrid/node_1/job_abc.2.1"));
  EXPECT_TRUE(values_of(args, "--memory").empty()) << "the task's own groups carry the caps";

  run.cgroup_parent.clear();
  args = container_run_args(run);
  EXPECT_TRUE(values_of(args, "--cgroup-parent").empty());
  EXPECT_THAT(values_of(args, "--memory"), ElementsAre("4294967296"));
  EXPECT_THAT(values_of(args, "--memory-swap"), ElementsAre("4294967296"));
  EXPECT_THAT(values_of(args, "--cpus"), ElementsAre("1.500"));
}

TEST(ContainerRunTest, TaskUserAndDevicesAndDocker) {
  ContainerRun run = sample_run();
  run.user = std::pair{1001u, 1002u};
  run.devices = {"/dev/nvidia3", "/dev/nvidiactl"};
  run.engine = {"docker", "/usr/bin/docker", "28.2.2"};
  auto args = container_run_args(run);
  EXPECT_THAT(values_of(args, "--user"), ElementsAre("1001:1002"));
  EXPECT_THAT(values_of(args, "--device"), ElementsAre("/dev/nvidia3", "/dev/nvidiactl"));
  EXPECT_FALSE(has(args, "--replace")) << "docker has no --replace";
}

TEST(GpuDevicesTest, DeviceNodesOfTheVisibleGpusNumberedFromZeroInside) {
  auto gpus = gpu_devices({2, 3}, false, {"/dev/nvidiactl", "/dev/nvidia-uvm"});
  EXPECT_THAT(gpus.devices, ElementsAre("/dev/nvidia2", "/dev/nvidia3", "/dev/nvidiactl", "/dev/nvidia-uvm"));
  EXPECT_EQ(gpus.visible, "0,1");
}

TEST(GpuDevicesTest, CdiNamesWhenTheNodeHasACdiSpec) {
  auto gpus = gpu_devices({5, 1}, true, {"/dev/nvidiactl"});
  EXPECT_THAT(gpus.devices, ElementsAre("nvidia.com/gpu=5", "nvidia.com/gpu=1"));
  EXPECT_EQ(gpus.visible, "0,1") << "in the order given: the task's own GPU first stays first";
}

TEST(GpuDevicesTest, ATaskWithoutGpusGetsNoDevice) {
  auto gpus = gpu_devices({}, false, {"/dev/nvidiactl"});
  EXPECT_TRUE(gpus.devices.empty());
  EXPECT_EQ(gpus.visible, "");
}

TEST(ImageEnvTest, ReadsTheImagesVariablesAndGivesABareImageAPath) {
  auto env = parse_image_env(R"(["PATH=/opt/conda/bin:/usr/bin","LANG=C.UTF-8","EMPTY=","A=b=c"])");
  ASSERT_TRUE(env.has_value());
  EXPECT_EQ(env->at("PATH"), "/opt/conda/bin:/usr/bin");
  EXPECT_EQ(env->at("LANG"), "C.UTF-8");
  EXPECT_EQ(env->at("EMPTY"), "");
  EXPECT_EQ(env->at("A"), "b=c");
  auto bare = parse_image_env("null\n");
  ASSERT_TRUE(bare.has_value());
  EXPECT_EQ(bare->at("PATH"), "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
  EXPECT_FALSE(parse_image_env("{\"PATH\": 1}").has_value());
  EXPECT_FALSE(parse_image_env("not json").has_value());
}

TEST(PullProgressTest, SumsTheBytesOfEveryBlobFromTheEnginesBars) {
  PullProgress progress;
  EXPECT_EQ(progress.text(), "");
  EXPECT_FALSE(progress.add("Trying to pull registry.example/train:1.4..."));
  EXPECT_FALSE(progress.add("Copying blob 5c8bb0a0 skipped: already exists"));
  EXPECT_TRUE(progress.add("Copying blob 8e790810b21b [======>-------] 23.7MiB / 57.2MiB"));
  EXPECT_EQ(progress.text(), "23/57 MiB");
  EXPECT_TRUE(progress.add("\x1b[1A\x1b[JCopying blob 1f2e3d4c5b6a [>---] 1.0GiB / 1.5GiB"));
  EXPECT_EQ(progress.text(), "1,047/1,593 MiB");
  EXPECT_FALSE(progress.add("Copying blob 8e790810b21b [======>-------] 23.7MiB / 57.2MiB")) << "no change";
  EXPECT_TRUE(progress.add("\x1b[1A\x1b[JCopying blob 8e790810b21b done  "));
  EXPECT_EQ(progress.text(), "1,081/1,593 MiB");
  EXPECT_FALSE(progress.add("Copying config 538843aca5 [=====] 409.0b / 409.0b"));
  EXPECT_FALSE(progress.add("Copying blob abc [==] lots / more")) << "sizes it cannot read";
}

TEST(PullProgressTest, TerminalCodesAreStripped) {
  EXPECT_EQ(strip_terminal_codes("\x1b[1A\x1b[JCopying blob x done"), "Copying blob x done");
  EXPECT_EQ(strip_terminal_codes("plain"), "plain");
}

TEST(EngineDetectionTest, NoneMeansNoEngineWithTheReason) {
  std::string why;
  EXPECT_FALSE(detect_container_engine("none", &why).has_value());
  EXPECT_EQ(why, "the worker runs with --container-engine none");
}

// A fake engine: a script that logs each call, knows the image once it was pulled, and
// takes a moment to pull (so that two tasks ask while the pull runs).
class FakeEngine {
 public:
  FakeEngine() : dir_(std::filesystem::temp_directory_path() / ("ag-fake-engine-" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "podman").string();
    std::ofstream(path_) << "#!/bin/sh\n"
                            "echo \"$@\" >> " << (dir_ / "calls").string() << "\n"
                            "case \"$1 $2\" in\n"
                            "  'image inspect') [ -f " << (dir_ / "pulled").string()
                         << " ] && echo '[\"PATH=/opt/bin:/usr/bin\"]' && exit 0; echo 'Error: image not known'; exit 125;;\n"
                            "  'pull missing:1') echo 'Error: initializing source: manifest unknown'; exit 125;;\n"
                            "  pull*) echo 'Copying blob sha256:aa'; sleep 0.3; touch " << (dir_ / "pulled").string()
                         << "; echo 'Writing manifest'; exit 0;;\n"
                            "esac\n";
    std::filesystem::permissions(path_, std::filesystem::perms(0755));
  }
  ~FakeEngine() { std::filesystem::remove_all(dir_); }
  ContainerEngine engine() const { return {"podman", path_, "4.3.1"}; }
  std::vector<std::string> calls() const {
    std::vector<std::string> out;
    std::ifstream in(dir_ / "calls");
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  }

 private:
  std::filesystem::path dir_;
  std::string path_;
};

// Runs `io` until `done()`, reaping the commands' processes as the agent's runner does.
void run_until(boost::asio::io_context& io, const std::function<bool()>& done) {
  for (int i = 0; i < 1000 && !done(); ++i) {
    io.poll();
    int status = 0;
    for (pid_t pid; (pid = ::waitpid(-1, &status, WNOHANG)) > 0;) AsyncCommand::reaped(pid, status);
    io.restart();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

TEST(ContainerImagesTest, TasksThatAskTogetherShareOnePullAndLaterOnesNone) {
  FakeEngine fake;
  boost::asio::io_context io;
  ContainerImages images(io, fake.engine());
  std::vector<Result<ImageConfig>> results;
  std::vector<std::string> progress;
  for (int i = 0; i < 3; ++i) {
    images.prepare("team/train:1", [&](const std::string& p) { progress.push_back(p); },
                   [&](Result<ImageConfig> r) { results.push_back(std::move(r)); });
  }
  run_until(io, [&] { return results.size() == 3; });

  ASSERT_EQ(results.size(), 3u);
  for (const auto& r : results) {
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r.value().env.at("PATH"), "/opt/bin:/usr/bin");
  }
  auto calls = fake.calls();
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "pull team/train:1"), 1) << "one pull for the three tasks";
  EXPECT_FALSE(progress.empty());
  EXPECT_EQ(progress[0], "pulling team/train:1 with podman 4.3.1");

  // Known now: no engine call at all.
  std::optional<Result<ImageConfig>> later;
  images.prepare("team/train:1", nullptr, [&](Result<ImageConfig> r) { later = std::move(r); });
  run_until(io, [&] { return later.has_value(); });
  ASSERT_TRUE(later.has_value() && later->ok());
  EXPECT_EQ(fake.calls().size(), calls.size());
}

TEST(ContainerImagesTest, APullThatFailsGivesTheEnginesWordsToEveryTaskWaiting) {
  FakeEngine fake;
  boost::asio::io_context io;
  ContainerImages images(io, fake.engine());
  std::vector<Result<ImageConfig>> results;
  for (int i = 0; i < 2; ++i) {
    images.prepare("missing:1", nullptr, [&](Result<ImageConfig> r) { results.push_back(std::move(r)); });
  }
  run_until(io, [&] { return results.size() == 2; });
  ASSERT_EQ(results.size(), 2u);
  for (const auto& r : results) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::kNotFound);
    EXPECT_EQ(r.error().message, "podman could not pull missing:1: Error: initializing source: manifest unknown");
  }
}

TEST(ContainerImagesTest, ANodeWithoutAnEngineSaysSo) {
  boost::asio::io_context io;
  ContainerImages images(io, std::nullopt);
  std::optional<Result<ImageConfig>> result;
  images.prepare("x:1", nullptr, [&](Result<ImageConfig> r) { result = std::move(r); });
  io.run();
  ASSERT_TRUE(result.has_value());
  ASSERT_FALSE(result->ok());
  EXPECT_EQ(result->error().message, "this node has no container engine (install podman or docker)");
}

}  // namespace
}  // namespace ag::worker
