#include "common/descriptors.h"

#include <linux/close_range.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>

namespace ag {
namespace {

constexpr const char* kHowToRaise =
    "raise it in the shell that starts it (`ulimit -n 65536`; as root, or after raising the hard "
    "limit in /etc/security/limits.conf), or with LimitNOFILE=65536 in its systemd unit";

uint64_t current_limit() {
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  return static_cast<uint64_t>(limit.rlim_cur);
}

}  // namespace

uint64_t raise_descriptor_limit() {
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  if (limit.rlim_cur < limit.rlim_max) {
    struct rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  return static_cast<uint64_t>(limit.rlim_cur);
}

Result<uint64_t> claim_descriptors(const std::string& daemon, uint64_t minimum) {
  const uint64_t limit = raise_descriptor_limit();
  if (limit >= minimum) return limit;
  return Error{ErrorCode::kResourceExhausted,
               daemon + " may open only " + std::to_string(limit) +
                   " files (RLIMIT_NOFILE, `ulimit -Hn`) and needs at least " + std::to_string(minimum) +
                   " (one per connection, task log and package download); " + kHowToRaise};
}

std::string descriptor_limit_hint(int error_number) {
  if (error_number == EMFILE) {
    return " (this process may open " + std::to_string(current_limit()) + " files, all in use; " + kHowToRaise + ")";
  }
  if (error_number == ENFILE) {
    std::string max;
    std::ifstream("/proc/sys/fs/file-max") >> max;
    return " (the whole system's open files are at their limit" + (max.empty() ? "" : ", fs.file-max = " + max) +
           "; raise it with `sysctl -w fs.file-max=N`, or close what holds them)";
  }
  return "";
}

int close_descriptors_from(unsigned first, bool cloexec) {
  return static_cast<int>(::syscall(SYS_close_range, first, ~0U, cloexec ? CLOSE_RANGE_CLOEXEC : 0U));
}

}  // namespace ag
