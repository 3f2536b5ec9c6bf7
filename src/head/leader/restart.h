// How a head that stops leading becomes a standby: it runs itself again, in the same
// process (same pid, same arguments), with nothing of its leading state left: no
// connection, no queued write, no buffered log byte survives the exec. The new image
// sees kRestartedEnv set and starts as a head that was already running: no daemonizing,
// no banner, and a store it cannot reach is waited for rather than an error.
#pragma once

#include <string>

namespace ag::head {

inline constexpr const char* kRestartedEnv = "AG_HEAD_RESTARTED";

// Logs `why`, closes every descriptor but stdin, stdout and stderr, and execs
// /proc/self/exe with this process's arguments. Does not return: when the exec fails
// the process exits (a head that cannot stand by must not go on leading).
[[noreturn]] void restart_as_standby(const std::string& why);

}  // namespace ag::head
