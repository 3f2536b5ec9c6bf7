// TaskLauncher: what the agent starts, stops and recovers tasks through. The product's
// is TaskRunner (task_runner.h: a task supervisor, process groups, cgroups, output
// files followed with inotify); unit tests pass a fake, and a container launcher
// would be another implementation.
//
//   recover() -> adopted / ended tasks;  launch(spec) -> pid;  kill(task, grace)
//   events: the task's output grew (read it with read_output), exit
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/protocol.h"
#include "common/result.h"
#include "worker/container_engine.h"
#include "worker/task_limits.h"

namespace ag::worker {

// A task that runs in a container image (worker/container_engine.h).
struct ContainerTask {
  ContainerEngine engine;
  std::string node_id;
  std::string image;
  std::vector<api::Mount> mounts;
  std::vector<std::string> devices;        // --device values (its GPUs)
  std::map<std::string, std::string> env;  // the container's whole environment
};

struct LaunchSpec {
  api::TaskKey id;
  std::string entrypoint;
  std::map<std::string, std::string> env;  // complete environment of the task (of the engine's client, for a container)
  std::string working_dir;                  // created if missing
  int64_t orphan_timeout_ms = 10000;        // kill the task when no agent runs for this long
  TaskLimits limits;                        // caps, where the node can enforce them
  std::optional<ContainerTask> container;   // set: run `entrypoint` in this image
  std::string owner;                        // the user who submitted the job: whose account it runs as
};

// What a launcher reports, on the owner's thread.
struct LauncherEvents {
  // The task wrote more output. The launcher keeps every byte (the agent reads them at
  // its own pace, so a task that writes faster than the head takes never grows memory).
  std::function<void(const api::TaskKey&)> on_output;
  std::function<void(const api::TaskKey&, const api::TaskExit&)> on_exit;
};

class TaskLauncher {
 public:
  virtual ~TaskLauncher() = default;

  // Where events go; set once, before recover() or launch().
  virtual void set_events(LauncherEvents events) = 0;

  struct Recovered {
    api::TaskKey id;
    int64_t pid = 0;
    std::optional<api::TaskExit> exit;  // set when it ended while no agent ran
  };
  // Finds the tasks a previous agent left: running ones are adopted (output and exit
  // followed from now on), ended ones are returned with their exit for reporting.
  virtual std::vector<Recovered> recover() = 0;

  // Who `owner`'s host tasks are: HOME, USER and LOGNAME of the account they run as,
  // for their environment (and what it expands against); empty when they run as the
  // worker's own user. Errors: the account's (no number left to give).
  virtual Result<std::map<std::string, std::string>> identity(const std::string& owner) {
    return std::map<std::string, std::string>{};
  }

  // Starts the task; returns its pid. Errors: kConflict when that task already runs;
  // kInvalidArgument / kInternal with the reason it could not start.
  virtual Result<int64_t> launch(const LaunchSpec& spec) = 0;

  // Stops every process of the task: SIGTERM now, SIGKILL after `grace_ms`. Unknown
  // or finished tasks are ignored.
  virtual void kill(const api::TaskKey& id, int64_t grace_ms) = 0;
  // Kills every task at once (worker shutdown).
  virtual void kill_all(int64_t grace_ms) = 0;

  // The head has recorded the task's end: what the launcher kept of it can go.
  virtual void forget(const api::TaskKey& id) = 0;

  // Looks for tasks whose keeper died meanwhile and ends them as lost (called with
  // every heartbeat).
  virtual void check() = 0;

  // Where a command run beside a running task goes (`ag exec`): the task's first
  // process (whose user, environment and directory the command takes), the control
  // groups it joins, and the task's container, if any. Errors: kNotFound when the task
  // does not run here.
  struct ExecTarget {
    int64_t pid = 0;
    std::vector<std::string> cgroups;
    std::string container;    // "" for a host task
    std::string engine_path;  // the container's engine
    std::vector<int> processes;  // every process of the task now
  };
  virtual Result<ExecTarget> exec_target(const api::TaskKey& id) const {
    return not_found("task " + id.to_string() + " does not run on this node");
  }

  struct Running {
    api::TaskKey id;
    int64_t pid = 0;
    std::string cgroup;  // its control group, "" where it has none
  };
  virtual std::vector<Running> running() const = 0;
  virtual bool idle() const = 0;
  // Whether the task is running here (launched or adopted, and not ended).
  virtual bool runs(const api::TaskKey& id) const = 0;
  // Bytes of output the task has written so far (-1 when nothing is kept).
  virtual int64_t output_size(const api::TaskKey& id) const = 0;
  // Appends up to `max_bytes` of the task's output from `offset` to `out` (the agent
  // reads straight into the frame it sends) and returns how many (0 at its end), for
  // as long as the task is not forgotten. Errors: kNotFound when nothing is kept.
  virtual Result<size_t> read_output(const api::TaskKey& id, int64_t offset, int64_t max_bytes,
                                     std::string& out) const = 0;
  // The file that holds the task's output (what read_output reads), for sending it
  // with sendfile(2).
  virtual std::string output_path(const api::TaskKey& id) const = 0;
};

}  // namespace ag::worker
