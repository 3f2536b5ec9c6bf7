#include "common/scheduling.h"

#include <dirent.h>
#include <sched.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace ag {

std::string yield_to_tasks() {
  // sched_setscheduler(2) sets one thread: each of those already running, by its id.
  DIR* threads = ::opendir("/proc/self/task");
  if (threads == nullptr) return std::string("cannot list this process's threads: ") + std::strerror(errno);
  std::string failed;
  const sched_param batch{};
  while (dirent* entry = ::readdir(threads)) {
    if (entry->d_name[0] == '.') continue;
    const pid_t tid = static_cast<pid_t>(std::atoi(entry->d_name));
    // A thread that ended meanwhile (ESRCH) needs nothing.
    if (::sched_setscheduler(tid, SCHED_BATCH, &batch) != 0 && errno != ESRCH && failed.empty()) {
      failed = std::string("cannot set SCHED_BATCH: ") + std::strerror(errno);
    }
  }
  ::closedir(threads);
  return failed;
}

bool runs_as_daemon() { return ::sched_getscheduler(0) == SCHED_BATCH; }

}  // namespace ag
