#include "worker/task_folders.h"

#include <sys/stat.h>
#include <unistd.h>

#include <climits>

namespace ag::worker {

std::string own_working_dir(const std::string& data_dir, const api::TaskKey& id) {
  return data_dir + "/work/" + id.job_id + "." + std::to_string(id.attempt) + "." + std::to_string(id.task_index);
}

TaskFolders::TaskFolders(std::string data_dir)
    : data_dir_(std::move(data_dir)),
      task_dirs_(data_dir_ + "/spare-task-dirs", kSpares, kTaskDirUses),
      // An empty working folder brings no churn of files with it: no limit on its uses.
      work_dirs_(data_dir_ + "/spare-work-dirs", kSpares, INT_MAX) {}

std::string TaskFolders::task_dir(const api::TaskKey& id) const {
  return data_dir_ + "/tasks/" + id.job_id + "." + std::to_string(id.attempt) + "." + std::to_string(id.task_index);
}

int TaskFolders::make_working_dir(const std::string& path, uid_t uid, gid_t gid, mode_t mode) {
  if (int err = work_dirs_.take(path); err != 0) return err;
  // A spare may have been another account's, and a new folder is the agent's.
  if (::lchown(path.c_str(), uid, gid) != 0 || ::chmod(path.c_str(), mode) != 0) return errno;
  return 0;
}

}  // namespace ag::worker
