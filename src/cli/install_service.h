// `ag install-service head|worker`: writes the systemd unit and the config file the
// packages ship (packaging/), for machines without the package: the unit runs this
// very binary, and the config file is the sample with the given settings filled in.
#pragma once

#include <string>
#include <vector>

#include "common/result.h"

namespace ag::cli {

struct InstallServiceOptions {
  std::string kind;                          // "head" or "worker"
  std::string unit_dir = "/etc/systemd/system";
  std::string config_dir = "/etc/aethergrid";
  std::vector<std::string> settings;         // KEY=VALUE for the config file (--set)
  std::string user = "aethergrid-head";      // the head's account
  bool force = false;                        // replace files that differ
};

// The unit for `kind` running `ag_path` with its config file in `config_dir`, as the
// head's `user` (head only). Errors: a path systemd would split (a space, a quote).
Result<std::string> unit_text(const std::string& kind, const std::string& ag_path, const std::string& config_dir,
                              const std::string& user);

// The sample config file for `kind` with paths under `config_dir` and each KEY=VALUE of
// `settings` in place of the key's sample line (a repeatable key's values as a list).
// Errors name a KEY=VALUE without '=' or a key the sample does not have.
Result<std::string> config_text(const std::string& kind, const std::string& config_dir,
                                const std::vector<std::string>& settings);

// Writes both files (nothing, if either exists with other contents and !force) and
// says what to do next. Returns the exit code.
int install_service(const InstallServiceOptions& options);

}  // namespace ag::cli
