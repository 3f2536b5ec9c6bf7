// Spreading a folder's subfolders across the file system (ext4's "top directory"
// flag, chattr +T).
//
// ext4 places a new folder, and the files in it, in its parent's block group. A folder
// that sees many short-lived subfolders (unpacked job dirs) then fills one
// group with freed inodes, and on a file system without a journal every new inode there
// first skips past each inode freed in the last minutes: creating a file costs ~100 µs
// instead of ~30 µs. With the flag on the parent, each new subfolder goes to a group of
// its own choosing, away from the churn; but making one there costs several times more
// (measured on this project's test VM: 113 µs of CPU and 330 µs of wall time against
// 13 and 15 beside its siblings), so folders whose subfolders are not removed, or are
// used again (worker/dir_pool.h), are left without it.
#pragma once

#include <string>

namespace ag {

// Sets the flag on `dir` (clears it with `spread` false: new subfolders then go beside
// their siblings, several times cheaper to make where none is removed). Best effort:
// returns false where the file system has no such flag (tmpfs, xfs, ...), which
// changes nothing else.
bool spread_subdirectories(const std::string& dir, bool spread = true);

}  // namespace ag
