#include "worker/launch_preparer.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/sha256.h"
#include "common/shell_quote.h"
#include "worker/task_folders.h"

namespace ag::worker {

std::string LaunchPreparer::node_name() const { return "node " + config_.node_id + " (" + config_.node_ip + ")"; }

void LaunchPreparer::prepare(api::Launch launch, int64_t orphan_timeout_ms, Note note, Ready ready) {
  auto shared = std::make_shared<api::Launch>(std::move(launch));
  LaunchSpec spec;
  spec.id = shared->task;
  spec.entrypoint = shared->entrypoint;
  spec.orphan_timeout_ms = orphan_timeout_ms;
  spec.limits = {shared->memory_limit_bytes, shared->cpu_limit_millis};
  spec.owner = shared->owner;
  const auto refuse = [&ready, &spec](const std::string& why) { ready(spec.id, internal_error(why)); };
  if (shared->image.empty()) {
    // Who the task is (its account's HOME, USER, LOGNAME), not who the worker is: what
    // its variables expand against too.
    auto identity = deps_.launcher.identity(spec.owner);
    if (!identity.ok()) return refuse(identity.error().message);
    api::Environment env = config_.inherited_env;
    for (auto& [name, value] : identity.value()) env[name] = value;
    return with_environment(shared, std::move(spec), env, ready);
  }
  const std::string node = node_name();
  // Checked again here: these go into the engine's command line.
  if (std::string problem = api::image_reference_problem(shared->image); !problem.empty()) {
    return refuse("image '" + shared->image.substr(0, 200) + "' " + problem);
  }
  if (std::string problem = mount_problem(shared->mounts); !problem.empty()) return refuse(problem);
  const std::string image = shared->image;
  deps_.images.prepare(
      image,
      [this, id = spec.id, node, note](const std::string& progress) {
        // Once per job: its tasks on this node wait for the same pull.
        std::string& last = last_note_[id.job_id];
        if (last == progress) return;
        last = progress;
        note(id, node + ": " + progress);
      },
      [this, shared, spec, node, image, ready](Result<ImageConfig> config) mutable {
        last_note_.erase(spec.id.job_id);
        if (!config.ok()) {
          return ready(spec.id, internal_error(node + " cannot run image " + image + ": " + config.error().message));
        }
        ContainerTask container;
        container.engine = deps_.images.engine();
        container.node_id = config_.node_id;
        container.image = image;
        container.mounts = shared->mounts;
        spec.container = std::move(container);
        // The task's environment builds on the image's, not the node's.
        with_environment(shared, std::move(spec), config.value().env, ready);
      });
}

std::string LaunchPreparer::mount_problem(const std::vector<api::Mount>& mounts) const {
  const std::string node = node_name();
  if (mounts.size() > api::kMaxMounts) return "more than " + std::to_string(api::kMaxMounts) + " mounts";
  if (std::string problem = api::mounts_problem(mounts); !problem.empty()) return "mounts: " + problem;
  for (const auto& m : mounts) {
    for (const std::string* path : {&m.source, &m.target}) {
      if (std::string problem = api::mount_path_problem(*path); !problem.empty()) return "mount path " + problem;
    }
    if (!api::allowing_prefix(m.source, config_.allowed_mounts)) {
      std::string allowed;
      for (const auto& prefix : config_.allowed_mounts) allowed += (allowed.empty() ? "" : ", ") + prefix;
      return "mount source " + m.source + " is not under a path " + node + " allows (" +
             (allowed.empty() ? "it allows none" : "it allows " + allowed) +
             "); start its worker with `--allow-mount " + m.source + "` (or a folder above it)";
    }
    struct stat st {};
    if (::stat(m.source.c_str(), &st) != 0) {
      return "mount source " + m.source + " does not exist on " + node + ": " + std::strerror(errno);
    }
  }
  return "";
}

void LaunchPreparer::with_environment(const std::shared_ptr<api::Launch>& launch, LaunchSpec spec,
                                      const api::Environment& base_env, const Ready& ready) {
  std::string shim;
  if (!launch->python_executable.empty()) {
    // `python` and `python3` resolve to the asked interpreter, wherever they appear.
    // In a container the interpreter is the image's: the shim is mounted there.
    auto dir = python_shim(launch->python_executable, !spec.container);
    if (!dir.ok()) return ready(spec.id, dir.error());
    shim = dir.value();
    if (spec.container) spec.container->mounts.push_back({shim, shim, true});
  }
  auto env = api::worker_task_environment(base_env, launch->env, launch->env_vars, shim, config_.network_interface);
  if (!env.ok()) return ready(spec.id, env.error());
  if (spec.container) {
    // The container's GPUs are numbered from 0 inside it.
    std::vector<int> visible;
    if (auto it = env.value().find("CUDA_VISIBLE_DEVICES"); it != env.value().end()) {
      std::stringstream ids(it->second);
      for (std::string id; std::getline(ids, id, ',');) {
        if (!id.empty() && std::all_of(id.begin(), id.end(), ::isdigit)) visible.push_back(std::stoi(id));
      }
    }
    GpuDevices gpus = gpu_devices(visible, nvidia_cdi_present(), nvidia_control_nodes());
    if (!visible.empty()) env.value()["CUDA_VISIBLE_DEVICES"] = gpus.visible;
    spec.container->devices = std::move(gpus.devices);
    spec.container->env = std::move(env.value());
    // The engine client's: the node's, less what tasks never get (credentials).
    auto client_env = api::worker_task_environment(config_.inherited_env, {}, {}, "");
    if (!client_env.ok()) return ready(spec.id, client_env.error());
    spec.env = std::move(client_env.value());
  } else {
    spec.env = std::move(env.value());
  }
  in_working_dir(launch, std::move(spec), ready);
}

void LaunchPreparer::in_working_dir(const std::shared_ptr<api::Launch>& launch, LaunchSpec spec, const Ready& ready) {
  const std::string& package = launch->working_dir_hash;
  if (package.empty()) {
    spec.working_dir = own_working_dir(config_.data_dir, spec.id);
    const api::TaskKey id = spec.id;  // before spec is moved
    return ready(id, std::move(spec));
  }
  deps_.packages.prepare(
      spec.id.job_id, package, spec.owner, [this, spec, package, ready](Result<std::string> dir) mutable {
        if (!dir.ok()) {
          return ready(spec.id, internal_error("working_dir package sha256:" + package + ": " + dir.error().message));
        }
        spec.working_dir = dir.value();
        // Counted once per task: a repeated launch of the same task must not keep it.
        if (!package_tasks_.insert(spec.id).second) deps_.packages.release(spec.id.job_id);
        const api::TaskKey id = spec.id;  // before spec is moved
        ready(id, std::move(spec));
      });
}

Result<std::string> LaunchPreparer::python_shim(const std::string& executable, bool on_node) const {
  if (executable.empty() || executable[0] != '/' || (on_node && ::access(executable.c_str(), X_OK) != 0)) {
    return invalid_argument("python executable '" + executable + "' not found on " + node_name() +
                            (executable[0] != '/' ? ": give an absolute path" : ""));
  }
  std::string dir = config_.data_dir + "/python-shims/" + sha256_hex(executable).substr(0, 16);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  // Scripts rather than symlinks: a virtualenv's interpreter reached through a link in
  // another folder would not find its environment, and sys.executable would name the link.
  const std::string quoted = shell_quote(executable);
  for (const char* name : {"python", "python3"}) {
    std::string path = dir + "/" + name;
    std::string tmp = path + ".tmp";
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << "#!/bin/sh\nexec " << quoted << " \"$@\"\n";
      if (!out) return internal_error("cannot write " + tmp);
    }
    std::filesystem::permissions(tmp, std::filesystem::perms(0755), ec);
    std::filesystem::rename(tmp, path, ec);
    if (ec) return internal_error("cannot create " + path + ": " + ec.message());
  }
  return dir;
}

void LaunchPreparer::adopted(const api::TaskKey& task) {
  if (deps_.packages.retain(task.job_id)) package_tasks_.insert(task);
}

void LaunchPreparer::finished(const api::TaskKey& task) {
  if (package_tasks_.erase(task)) deps_.packages.release(task.job_id);
}

}  // namespace ag::worker
