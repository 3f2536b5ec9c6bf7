#include "head/leader/restart.h"

#include "common/descriptors.h"

#include <spdlog/spdlog.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

namespace ag::head {

void restart_as_standby(const std::string& why) {
  spdlog::error("this head stops leading: {}; it restarts as a standby", why);
  spdlog::default_logger()->flush();
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<char*> argv;
  for (size_t at = 0; at < cmdline.size(); at = cmdline.find('\0', at) + 1) {
    argv.push_back(cmdline.data() + at);
    if (cmdline.find('\0', at) == std::string::npos) break;
  }
  if (argv.empty()) {
    spdlog::critical("cannot read this process's arguments to restart it; exiting");
    spdlog::default_logger()->flush();
    ::_exit(70);
  }
  argv.push_back(nullptr);
  ::setenv(kRestartedEnv, "1", 1);
  // Every descriptor but the standard three goes with the exec: marked close-on-exec
  // rather than closed, so that the threads still running meanwhile never see a number
  // reused under them.
  // (The system call itself: glibc's wrapper is 2.34's, newer than the portable
  // binary's 2.31.)
  if (::syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
    for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
      const int fd = std::atoi(entry.path().filename().c_str());
      if (fd > 2) (void)::fcntl(fd, F_SETFD, FD_CLOEXEC);
    }
  }
  ::execv("/proc/self/exe", argv.data());
  const int err = errno;
  spdlog::critical("cannot restart as a standby ({}); exiting", std::strerror(err));
  spdlog::default_logger()->flush();
  ::_exit(70);
}

}  // namespace ag::head
