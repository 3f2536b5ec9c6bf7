// `ag start-head --config FILE` and `ag start-worker --config FILE`: the daemon's
// options from a file (packaging/config/head.conf and worker.conf are the samples, with
// every option). Keys are the long flag names without their dashes, in TOML or INI
// syntax (`port = 6379`, `block = true`, `label = ["gpu=a100", "zone=b"]`); a flag
// given on the command line overrides the file's value.
#pragma once

#include <string>
#include <vector>

#include "common/result.h"

namespace CLI {
class App;
}  // namespace CLI

namespace ag::cli {

// Applies the keys of the config file at `path` to the options of `command` (an
// already parsed subcommand) that its command line left unset, running each option's
// checks. `global` is the parent app, whose --insecure a file may also set.
// Errors (kInvalidArgument), each naming the file and what to do: the file cannot be
// read, a key is no option of the command (with the closest one), a value is wrong for
// its option, a section or a token is in it. On an error the caller starts nothing.
// Returns the keys the file set (those the command line did not).
Result<std::vector<std::string>> apply_config_file(CLI::App& command, CLI::App& global, const std::string& path);

}  // namespace ag::cli
