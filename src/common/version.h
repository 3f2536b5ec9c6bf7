// Which AetherGrid this is: the release version, the git commit it was built from and
// the build type, as `ag --version`, GET /api/version, `ag status` and the dashboard
// footer show them. Filled in when the build is configured (src/common/version.cc.in).
#pragma once

#include <string>

namespace ag {

// The version of the head <-> worker protocol (api/protocol.h) this build speaks. A
// change a peer of the previous version could misread raises it; the head accepts
// workers from kOldestWorkerProtocol to kWorkerProtocol and refuses others, naming both.
inline constexpr int kWorkerProtocol = 1;
inline constexpr int kOldestWorkerProtocol = 1;

struct BuildInfo {
  std::string version;     // "0.1.0"
  std::string commit;      // short git commit, "unknown" outside a git checkout
  std::string build_type;  // "RelWithDebInfo", ...
};

const BuildInfo& build_info();

// "AetherGrid 0.1.0 (commit 1a2b3c4, RelWithDebInfo, worker protocol 1)".
std::string version_line();

}  // namespace ag
