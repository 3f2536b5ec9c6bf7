// How `ag`'s command line is read: the global options every command accepts, and the
// task command after `--`, which is kept whole.
//
// CLI11 ends an option that takes several values (`--env`, `--exclude`, `--after`, ...)
// at a `--` and swallows that `--`, so `ag submit --env K=V -- bash -c 'x'` would make
// `-c` an option of ag's. parse_command_line cuts the command line at the first `--`
// after a command that takes a task command, before CLI11 sees it, and hands the words
// after it over as they are.
#pragma once

#include <string>
#include <vector>

#include "cli/session.h"

namespace CLI {
class App;
}

namespace ag::cli {

// --address, --token, --token-file, -o/--output, --insecure.
void add_connection_options(CLI::App& app, ConnectionOptions& options);

// A command that runs a task command given after `--` (`ag submit -- python train.py`)
// and where its words go.
struct TrailingCommand {
  std::string name;                  // the subcommand, "submit"
  std::vector<std::string>* words;   // the words after `--`, whole
};

// The first `--` after the subcommand named in `trailing`, as an index into `args`
// (args[0] is the program); args.size() when there is none, or when the subcommand is
// another one. Values of the global options before the subcommand are skipped
// (`ag --address h:1 submit`), so is a `--` that stands before it.
size_t trailing_command_start(const CLI::App& app, const std::vector<std::string>& args,
                              const std::vector<TrailingCommand>& trailing);

// Parses `args` with `app` as app.parse(argc, argv) would, except that everything after
// the subcommand's first `--` is the task command, word for word. Throws what
// CLI::App::parse throws, and CLI::ValidationError when words stand both before and
// after the `--` (`ag submit python -- train.py`: which is the command?).
void parse_command_line(CLI::App& app, const std::vector<std::string>& args,
                        const std::vector<TrailingCommand>& trailing);

}  // namespace ag::cli
