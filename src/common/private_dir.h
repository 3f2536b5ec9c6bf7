// Folders that hold credentials and state (the session dir, data dirs) belong to the
// user who runs AetherGrid and to no one else. On a shared host /tmp/aethergrid-$UID is
// a predictable name: another user may have made it first, or planted a link there.
#pragma once

#include <string>

#include "common/result.h"

namespace ag {

// Makes `path` (and its parents) when missing, the folder itself with mode 0700, and
// checks what is there: a folder of this user's, tightened when others could list or
// write it (they keep at most the right to pass through). Errors: kPermissionDenied for a symbolic link or a folder of another user
// (saying what to do), kInvalidArgument when it is not a folder, kInternal naming the
// path when it cannot be made.
Status ensure_private_dir(const std::string& path);

}  // namespace ag
