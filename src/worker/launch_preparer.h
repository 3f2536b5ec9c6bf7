// LaunchPreparer: the steps between a launch message and a task to spawn, each of
// which may refuse it with the reason (the agent then reports a start error):
//
//   host task:  who it runs as (HOME, USER, LOGNAME) --+
//   image:      reference and mounts checked, the image --> environment: the node's or
//               pulled (progress noted once per job)     |  the image's, the job's env,
//                                                        |  the python shim, GPUs numbered
//                                                        |  from 0 inside a container
//                                                        +--> working dir: the task's own
//                                                             folder, or the job's
//                                                             unpacked package
//
// It also counts the tasks that run in a working_dir package, so that a job's unpacked
// package is released once none of its tasks here needs it. Owner's (io) thread only.
#pragma once

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "api/protocol.h"
#include "common/result.h"
#include "worker/agent_config.h"
#include "worker/container_engine.h"
#include "worker/package_cache.h"
#include "worker/task_launcher.h"

namespace ag::worker {

class LaunchPreparer {
 public:
  struct Deps {
    TaskLauncher& launcher;  // who a host task runs as
    PackageProvider& packages;
    ImageProvider& images;
  };
  // `config`: the agent's, read at each launch (its network interface may change).
  LaunchPreparer(Deps deps, const AgentConfig& config) : deps_(deps), config_(config) {}

  // What to tell the head about a launch that waits (an image pull's progress).
  using Note = std::function<void(const api::TaskKey& task, const std::string& text)>;
  // The task ready to spawn, or why it cannot start.
  using Ready = std::function<void(const api::TaskKey& task, Result<LaunchSpec> spec)>;
  void prepare(api::Launch launch, int64_t orphan_timeout_ms, Note note, Ready ready);

  // A task a previous agent left, adopted: it keeps its job's package if it has one.
  void adopted(const api::TaskKey& task);
  // The head has the task's end: its package may go.
  void finished(const api::TaskKey& task);

 private:
  void with_environment(const std::shared_ptr<api::Launch>& launch, LaunchSpec spec, const api::Environment& base_env,
                        const Ready& ready);
  void in_working_dir(const std::shared_ptr<api::Launch>& launch, LaunchSpec spec, const Ready& ready);
  // Why the node cannot give the task these mounts ("" when it can).
  std::string mount_problem(const std::vector<api::Mount>& mounts) const;
  // A directory with `python` and `python3` scripts that run `executable`, for PATH.
  // `on_node`: the interpreter is the node's own (checked here), not an image's.
  Result<std::string> python_shim(const std::string& executable, bool on_node) const;
  std::string node_name() const;

  Deps deps_;
  const AgentConfig& config_;
  std::set<api::TaskKey> package_tasks_;          // tasks running in a working_dir package
  std::map<std::string, std::string> last_note_;  // job -> the last pull progress it was told
};

}  // namespace ag::worker
