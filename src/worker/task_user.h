// TaskUser: an unprivileged account tasks run as, so that a job cannot read what the
// worker keeps (its node credential, its data dir, the token files of the user who
// runs it) nor, on a shared worker, another user's files. Which account each task gets
// is TaskAccounts' choice (worker/task_accounts.h); this file finds a named account
// (`ag start-worker --task-user NAME`) and hands folders to one.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "common/result.h"

namespace ag::worker {

struct TaskUser {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary groups (video, render for GPUs, ...)
  std::string home;
};

// The account named `name`; nullopt when it is the worker's own. `note` gets a line for
// the worker's log. Errors: kInvalidArgument for an unknown user or root,
// kPermissionDenied when the worker is not root (only root can start processes as
// another user).
Result<std::optional<TaskUser>> resolve_task_user(const std::string& name, std::string* note);

// Lets the task user pass through every folder above `path` (search permission only,
// never listing): folders of this worker's user get o+x, logged; a folder of someone
// else that the task user cannot pass is an error saying so.
Status open_path_to_task_user(const std::string& path, const TaskUser& user);

// Hands `path` (and with `recursive`, everything under it; links themselves, never
// what they point at) to the task user. Errors: kInternal naming the path.
Status give_to_task_user(const std::string& path, const TaskUser& user, bool recursive);

}  // namespace ag::worker
