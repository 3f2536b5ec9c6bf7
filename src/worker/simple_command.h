// Entrypoints /bin/sh would only split into words and exec: those run without the shell.
//
// A task's entrypoint is a shell command line, run as `/bin/sh -c ENTRYPOINT`. Most are a
// program and its arguments (what `ag submit -- CMD ARGS...` quotes into one), for which
// the shell does nothing but split the words, search PATH and exec, in the same process.
// For those the supervisor does the same itself and saves the shell's own start (about
// half a millisecond of CPU and wall time each, per rank). Anything else the shell
// could give a meaning to (expansions, redirections, globs, assignments, builtins,
// keywords, comments, several commands) keeps the shell, and so does every failure:
// when no candidate on PATH can be executed the task falls back to `/bin/sh -c` itself,
// which reports "not found" (127) or "Permission denied" (126) as always.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ag::worker {

// The words of `line` when it is a simple command the shell would only exec (a leading
// `exec` dropped); nullopt otherwise.
std::optional<std::vector<std::string>> simple_command(std::string_view line);

// Where the shell would look for `program`, in order: itself when it has a '/', else
// each folder of `path` (the task's PATH; an empty entry is the working folder).
std::vector<std::string> program_candidates(const std::string& program, std::string_view path);

}  // namespace ag::worker
