// Daemon logging set-up. Modules log through spdlog's default logger; this sets
// where it goes: stderr, a file in the daemon's data dir, or both.
#pragma once

#include <string>

namespace ag {

struct LogTargets {
  // Append to this file (made 0640 when new); empty: no file.
  std::string file_path;
  // Also write to stderr. When stderr is the systemd journal (JOURNAL_STREAM names
  // it), lines there carry the journal's priority prefix ("<3>" for errors) and no
  // timestamp of their own, so `journalctl -p warning` filters them.
  bool to_stderr = false;
  bool verbose = false;
};

// True when descriptor `fd` is the stream systemd connected to the journal
// (JOURNAL_STREAM names its device and inode).
bool is_journal_stream(int fd);

// Routes spdlog's default logger (named "ag") to `targets`; called again, it replaces
// the previous set-up. Returns an error message when the file cannot be opened (then
// only stderr is used, or stderr alone when no other target was asked for), else "".
std::string init_logging(const LogTargets& targets);

}  // namespace ag
