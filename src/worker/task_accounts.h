// TaskAccounts: which Unix account each AetherGrid user's tasks run as on this worker,
// so that on a worker shared by several users' jobs a task reads its own files and
// nothing of another user's (working dirs, unpacked packages, homes).
//
//   worker as root, no --task-user -> one account per AetherGrid user: a uid from
//       kFirstTaskUid on that no local account or group holds, a private group of the
//       same number, the groups that open GPUs (video, render), and a home of its own
//       under <data dir>/homes/ (0700). The numbers are kept in
//       <data dir>/task-accounts.json (0600, synced), and each home's owner beside it
//       (homes/UID.owner, root's), so a user keeps theirs across restarts and crashes,
//       and a number whose home is still there is never given to another user.
//   --task-user NAME               -> every task runs as NAME (the operator's choice:
//       jobs of different users can then read each other's files)
//   worker not root                -> tasks run as the worker's own user
//
// Thread-safe: the package thread and the io thread both ask.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "common/result.h"
#include "worker/task_user.h"

namespace ag::worker {

inline constexpr uid_t kFirstTaskUid = 1900000000;
inline constexpr uid_t kTaskUidCount = 65536;

class TaskAccounts {
 public:
  // `task_user`: --task-user ("" for the default above). `note` gets a line for the
  // worker's log saying how tasks run. Errors: those of resolve_task_user; kInternal
  // when the kept numbers cannot be read.
  static Result<std::unique_ptr<TaskAccounts>> open(const std::string& data_dir, const std::string& task_user,
                                                    std::string* note);

  // Whether tasks run as accounts other than the worker's.
  bool switches() const { return per_user_ || shared_.has_value(); }
  // Whether each user has an account of their own.
  bool per_user() const { return per_user_; }

  // The account `owner`'s tasks run as; nullopt: the worker's own. The first call for
  // a user gives them a number and a home. Errors: kResourceExhausted when every number
  // of the range is taken, kInternal when the number or the home cannot be kept.
  Result<std::optional<TaskUser>> for_owner(const std::string& owner);

  // An account that stands for all of them in checks of who may pass a folder: the
  // shared one, or one that owns nothing here (per user).
  std::optional<TaskUser> representative() const;

 private:
  TaskAccounts(std::string data_dir, bool per_user, std::optional<TaskUser> shared)
      : data_dir_(std::move(data_dir)), per_user_(per_user), shared_(std::move(shared)) {}
  Status load();
  Status save() const;
  Result<uid_t> allocate();
  TaskUser account(const std::string& owner, uid_t uid) const;

  std::string data_dir_;
  bool per_user_;
  std::optional<TaskUser> shared_;
  std::vector<gid_t> device_groups_;  // video, render: where they exist
  mutable std::mutex mu_;
  std::map<std::string, uid_t> uids_;  // by owner
  std::map<uid_t, bool> home_ready_;   // homes made (or checked) by this process
};

// The account name a user's tasks see in USER and LOGNAME: "ag-" and the user's name,
// with anything but letters, digits, '-', '_' and '.' as '_' ("ag-anonymous" for jobs
// without an owner).
std::string task_account_name(const std::string& owner);

}  // namespace ag::worker
