#include "head/leader/restart.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
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
  argv.push_back(nullptr);
  ::setenv(kRestartedEnv, "1", 1);
  ::close_range(3, ~0U, 0);
  ::execv("/proc/self/exe", argv.data());
  const int err = errno;
  spdlog::critical("cannot restart as a standby ({}); exiting", std::strerror(err));
  spdlog::default_logger()->flush();
  ::_exit(70);
}

}  // namespace ag::head
