// Containers on a worker: which engine the node has (podman, or docker with a running
// daemon), the images it keeps (pulled once per node, whoever asks meanwhile), and the
// engine command line that runs one task in its image.
//
//   detect_container_engine()          at start: "podman 4.3.1", or why there is none
//   ContainerImages::prepare(IMAGE)    inspect, else pull (progress lines), then inspect
//   container_run_args(ContainerRun)   `podman run --rm --replace --name ag-JOB-ATTEMPT-TASK ...`
//
// A task's container is part of its task: the engine's client is the task's process,
// and the container (with the engine's monitor, conmon) lives in a child group of the
// task's own control group (--cgroup-parent), so stops, limits, orphan kills and
// out-of-memory counts reach it as they reach a host task's processes.
#pragma once

#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/container_spec.h"
#include "common/result.h"

namespace ag::worker {

struct ContainerEngine {
  std::string name;     // "podman" or "docker"
  std::string path;     // the client binary
  std::string version;  // "4.3.1"
  std::string summary() const { return name + " " + version; }
};

// The engine to use: `wanted` is "auto" (podman, else docker), "podman", "docker" or
// "none". Runs the engine's client (synchronously: call it at start). nullopt with
// `why_not` set when there is none to use.
std::optional<ContainerEngine> detect_container_engine(const std::string& wanted, std::string* why_not);

// "ag-job_abc-0-3": the container of one task, so a relaunch replaces it and a sweep
// finds what is left.
std::string container_name(const std::string& job_id, int attempt, int task_index);

// One task's container, for container_run_args.
struct ContainerRun {
  ContainerEngine engine;
  std::string name;
  std::string node_id;
  std::string image;
  std::string entrypoint;   // run as /bin/sh -c ENTRYPOINT
  std::string working_dir;  // mounted at the same path, and the cwd
  std::string env_file;     // NAME=value lines: the task's whole environment
  std::vector<api::Mount> mounts;
  std::string cgroup_parent;    // the task's group, relative to its hierarchy ("" for none)
  int64_t memory_bytes = 0;     // the engine's own caps, used when there is no cgroup_parent
  int64_t cpu_millis = 0;
  std::vector<std::string> devices;                    // --device values
  std::optional<std::pair<uint32_t, uint32_t>> user;   // uid, gid
  uint64_t nofile_soft = 1024, nofile_hard = 1024;     // no higher than the node's own
  uint64_t nproc = 4096;
};
std::vector<std::string> container_run_args(const ContainerRun& run);

// The GPUs a container gets, and the CUDA_VISIBLE_DEVICES it sees inside (the devices
// are numbered from 0 there, in the order given). With a CDI spec for NVIDIA the CDI
// names; else the device nodes of those GPUs and the control nodes that exist.
struct GpuDevices {
  std::vector<std::string> devices;
  std::string visible;  // "" when the task has no GPU
};
GpuDevices gpu_devices(const std::vector<int>& visible_gpu_ids, bool cdi, const std::vector<std::string>& control_nodes);
// Whether the node has a CDI spec for NVIDIA GPUs, and its control device nodes.
bool nvidia_cdi_present();
std::vector<std::string> nvidia_control_nodes();

// An image as a task needs it: its own environment (for `$VAR` expansion of env_vars).
struct ImageConfig {
  std::map<std::string, std::string> env;
};

// Where the agent gets images (a fake in unit tests).
class ImageProvider {
 public:
  virtual ~ImageProvider() = default;
  // The engine ("" name when the node runs no containers).
  virtual const ContainerEngine& engine() const = 0;
  // Makes `image` present on the node, then calls `done` with its config. Concurrent
  // callers for the same image share one pull; `on_progress` gets the pull's progress.
  // Errors: kUnavailable when the node has no engine; kNotFound / kInternal
  // with the engine's own words when the pull fails.
  virtual void prepare(const std::string& image, std::function<void(const std::string& progress)> on_progress,
                       std::function<void(Result<ImageConfig>)> done) = 0;
};

class ContainerImages final : public ImageProvider {
 public:
  ContainerImages(boost::asio::io_context& io, const std::optional<ContainerEngine>& engine);
  const ContainerEngine& engine() const override { return engine_; }
  void prepare(const std::string& image, std::function<void(const std::string& progress)> on_progress,
               std::function<void(Result<ImageConfig>)> done) override;

 private:
  struct Waiter {
    std::function<void(const std::string&)> on_progress;
    std::function<void(Result<ImageConfig>)> done;
  };
  void inspect(const std::string& image, bool pull_if_missing);
  void pull(const std::string& image);
  void finish(const std::string& image, Result<ImageConfig> result);

  boost::asio::io_context& io_;
  ContainerEngine engine_;
  std::map<std::string, ImageConfig> known_;
  std::map<std::string, std::vector<Waiter>> waiting_;  // in flight, by image
};

// The bytes a pull has copied, from podman's progress bars (shown to a terminal):
//   "Copying blob 8e790810b21b [=====>----] 23.7MiB / 57.2MiB"  ->  "23/57 MiB"
// summed over the blobs seen so far.
class PullProgress {
 public:
  // One line of the engine's output. True when the count changed.
  bool add(std::string_view line);
  // "412/1,630 MiB", or "" before any count was seen.
  std::string text() const;

 private:
  std::map<std::string, std::pair<double, double>> blobs_;  // blob -> (bytes copied, bytes in all)
};
// `text` without terminal control sequences (ESC [ ... letter).
std::string strip_terminal_codes(std::string_view text);

// Parses `inspect --format '{{json .Config.Env}}'` output: ["PATH=/usr/bin", ...].
std::optional<std::map<std::string, std::string>> parse_image_env(const std::string& json_text);

}  // namespace ag::worker
