// Daemon logging set-up. Modules log through spdlog's default logger; this sets
// where it goes (a file in the daemon's data dir, or stderr in the foreground).
#pragma once

#include <string>

namespace ag {

// Routes spdlog's default logger to `path` (appending), or to stderr when empty.
void init_logging(const std::string& path, bool verbose);

}  // namespace ag
