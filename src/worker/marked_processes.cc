#include "worker/marked_processes.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>

namespace ag::worker {

std::vector<int> find_marked_processes(const std::string& marker) {
  std::vector<int> pids;
  std::string needle = "AG_TASK_MARKER=" + marker;
  DIR* proc = opendir("/proc");
  if (!proc) return pids;
  while (dirent* entry = readdir(proc)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    std::string path = std::string("/proc/") + entry->d_name + "/environ";
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    std::string env;
    char buf[8192];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0 && env.size() < (1 << 20)) env.append(buf, static_cast<size_t>(n));
    ::close(fd);
    // Variables are NUL-separated; match a whole entry.
    size_t pos = 0;
    while ((pos = env.find(needle, pos)) != std::string::npos) {
      bool starts = pos == 0 || env[pos - 1] == '\0';
      size_t end = pos + needle.size();
      bool ends = end == env.size() || env[end] == '\0';
      if (starts && ends) {
        pids.push_back(std::atoi(entry->d_name));
        break;
      }
      pos = end;
    }
  }
  closedir(proc);
  return pids;
}

void signal_task_processes(pid_t pgid, const std::vector<int>& listed, int sig) {
  if (pgid > 0) ::kill(-pgid, sig);
  const pid_t self = ::getpid();
  for (int pid : listed) {
    if (pid == self || (pgid > 0 && ::getpgid(pid) == pgid)) continue;
    ::kill(pid, sig);
  }
}

}  // namespace ag::worker
