// Folders made once and used again. Each task has a folder of its own on the node
// (tasks/<job>.<attempt>.<index>/: its output, record and exit) from its launch until
// the head has its exit; on ext4 a mkdir and its rmdir cost several times a rename (an
// inode to find and free, a block for its entries), so a task's folder is a spare
// renamed into place, and goes back to the spares, emptied, when the task is
// forgotten.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ag::worker {

class DirPool {
 public:
  // Spares live in `spare_dir` (emptied here: what an earlier agent left there is
  // not known to be empty), at most `keep` of them.
  DirPool(std::string spare_dir, size_t keep);

  // Makes the folder `path` (mode 0755, the agent's): a spare renamed there, or a new
  // one. Returns 0, or errno of the mkdir.
  int take(const std::string& path);

  // Empties `path` and keeps it as a spare; removes it instead when the spares are
  // full, or it holds a folder, or it cannot be emptied.
  void give_back(const std::string& path);

  size_t spares() const { return spares_.size(); }

 private:
  std::string dir_;
  size_t keep_;
  std::vector<std::string> spares_;
  uint64_t sequence_ = 0;
};

}  // namespace ag::worker
