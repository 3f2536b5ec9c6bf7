// A task's folders on the node, made and taken back by the TaskRunner:
//
//   tasks/<job>.<attempt>.<index>/  the agent's: the task's output, record and exit,
//                                   from its launch until the head has its exit
//   work/<job>.<attempt>.<index>/   the task's working folder where its job has no
//                                   working_dir package: what the task leaves there
//                                   is the user's and stays; a folder it left empty
//                                   serves a later task
//
// Both come from pools of emptied folders renamed into place (worker/dir_pool.h): on
// ext4 making a folder costs several times a rename, and tens of microseconds more
// where the parent's block group is full (ext4 then weighs group after group).
#pragma once

#include <sys/types.h>

#include <string>

#include "api/protocol.h"
#include "worker/dir_pool.h"

namespace ag::worker {

// The working folder of a task without a working_dir package.
std::string own_working_dir(const std::string& data_dir, const api::TaskKey& id);

class TaskFolders {
 public:
  static constexpr size_t kSpares = 32;    // emptied folders kept, of each kind
  static constexpr int kTaskDirUses = 16;  // tasks one tasks/ folder serves (DirPool)

  explicit TaskFolders(std::string data_dir);

  const std::string& data_dir() const { return data_dir_; }
  std::string task_dir(const api::TaskKey& id) const;

  // Makes the task's tasks/ folder; 0 or errno.
  int make_task_dir(const std::string& path) { return task_dirs_.take(path); }
  // Empties and takes back a tasks/ folder.
  void release_task_dir(const std::string& path) { task_dirs_.give_back(path); }
  // Makes a working folder owned by `uid`:`gid` with `mode` (a spare may have been
  // another account's); 0 or errno (EEXIST: it is there).
  int make_working_dir(const std::string& path, uid_t uid, gid_t gid, mode_t mode);
  // Takes back the task's own working folder if the task left it empty.
  void release_working_dir(const api::TaskKey& id) { work_dirs_.give_back_if_empty(own_working_dir(data_dir_, id)); }

 private:
  std::string data_dir_;
  DirPool task_dirs_;
  DirPool work_dirs_;
};

}  // namespace ag::worker
