// Emptied control groups kept for the next task (cgroup v1, groups the supervisor
// makes). Making a v1 group and removing it again costs the kernel more than most of a
// short task's start: each mkdir creates every control file of its controller, each
// rmdir tears them down and frees the group after an RCU grace period. A group whose
// task has ended with all its processes is renamed to a spare name beside it instead,
// and the next task's group of that folder is that spare renamed once more.
//
//   <dir>/warm.<supervisor pid>.<n>   a spare: a kept group, or one made for a ready-made
//                                     process (worker/warm_task.h); a supervisor that is
//                                     gone leaves them to the next one, which removes them
//
// Only groups nothing of the last task can be left in are kept: the caller keeps a group
// once its task's processes are all gone, and only for tasks that ran as an account that
// cannot make groups below it or change a group's controls (not root). A memory group is
// never kept: the kernel counts OOM kills per group, for good. What the next task sets
// (its caps) is written on its group however it was had.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace ag::worker {

class CgroupPool {
 public:
  // `per_dir`: how many spares a folder keeps at most.
  explicit CgroupPool(size_t per_dir = 8) : per_dir_(per_dir) {}
  ~CgroupPool() = default;
  CgroupPool(const CgroupPool&) = delete;
  CgroupPool& operator=(const CgroupPool&) = delete;

  // `group` (which does not exist yet) from a spare kept in its folder: what was written
  // on the spare's controls (`keep`'s `controls`); nullopt when none is kept there or
  // the rename failed (the caller makes the group itself).
  std::optional<std::string> take(const std::string& group);
  // A spare in `dir`: a kept one, else a new group; "" when none can be made (errno).
  std::string spare(const std::string& dir);
  // Keeps the emptied `group` as a spare, noting `controls`: what its caps were (the
  // next task with the same ones need not write them again). False when its folder
  // keeps enough already or it cannot be renamed (the caller removes it).
  bool keep(const std::string& group, std::string controls = "");
  // Removes every kept spare (the supervisor is leaving).
  void clear();

  size_t kept(const std::string& dir) const;

 private:
  std::string next_name(const std::string& dir);
  void sweep(const std::string& dir);

  size_t per_dir_;
  unsigned sequence_ = 0;
  struct Spare {
    std::string path;
    std::string controls;
  };
  std::map<std::string, std::vector<Spare>> kept_;        // folder -> its spares
  std::set<std::string> swept_;                           // folders cleared of stale spares
};

// Whether `name` (a group's last path part) is a spare's.
bool is_spare_name(const std::string& name);

}  // namespace ag::worker
