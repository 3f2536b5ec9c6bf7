// Folders made once and used again. Each task has a folder of its own on the node
// (tasks/<job>.<attempt>.<index>/: its output, record and exit) from its launch until
// the head has its exit; on ext4 a mkdir and its rmdir cost several times a rename (an
// inode to find and free, a block for its entries), so a task's folder is a spare
// renamed into place, and goes back to the spares, emptied, when the task is
// forgotten. A folder serves a few tasks, then is removed: the files of its tasks take
// inodes in its block group, and on ext4 without a journal each new inode there first
// skips every inode freed in the last minutes, so the churn must move on (new folders
// under a parent with the top-directory flag go to other groups, common/dir_spread.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ag::worker {

class DirPool {
 public:
  // Spares live in `spare_dir` (emptied here: what an earlier agent left there is
  // not known to be empty), at most `keep` of them; a folder serves `uses` takes.
  DirPool(std::string spare_dir, size_t keep, int uses);

  // Makes the folder `path` (mode 0755, the agent's): a spare renamed there, or a new
  // one. Returns 0, or errno of the mkdir.
  int take(const std::string& path);

  // Empties `path` and keeps it as a spare; removes it instead when it has served its
  // uses, the spares are full, or it holds a folder, or it cannot be emptied.
  void give_back(const std::string& path);

  // Keeps `path` as a spare if it holds nothing (and the spares are not full); else
  // leaves it as it is.
  void give_back_if_empty(const std::string& path);

  size_t spares() const { return spares_.size(); }

 private:
  struct Spare {
    std::string path;
    int used;  // takes so far
  };
  std::string dir_;
  size_t keep_;
  int uses_;
  std::vector<Spare> spares_;
  std::map<std::string, int> taken_;  // folders out, and their takes so far
  uint64_t sequence_ = 0;
};

}  // namespace ag::worker
