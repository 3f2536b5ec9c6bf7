// What `ag` adds to a command line it refused: the subcommand or flag the user
// probably meant ("did you mean `submit`?"), and for `ag submit` a reminder to put the
// task's command after `--`.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
class ParseError;
}  // namespace CLI

namespace ag::cli {

// "" or "\n" followed by the hint. `saw_double_dash`: the command line has `--` (then
// the task's command is where it belongs, and no reminder is given).
std::string usage_hint(CLI::App& app, const CLI::ParseError& error, bool saw_double_dash);

// The parser's message about a flag's value, said plainly: "--num-workers: 'abc' is not
// a whole number; give one from 1 to 4096" for "--num-workers: Value abc not in range
// 1 to 4096". Other messages come back unchanged.
std::string plain_value_error(const std::string& message);

// Whether the command line asks for JSON output (-o json, --output json, --output=json),
// read before the parser has (for its own errors).
bool json_requested(int argc, char** argv);

// The command a word most likely meant: what users of other schedulers type for it
// ("cancel", "squeue", "sbatch"), else the closest within a few edits; "" for none.
std::string meant_command(const std::string& word, const std::vector<std::string>& commands);

// A command line whose mistake is said best in one line of ag's own, in place of the
// parser's message: an unknown command (with the command meant, or the list of
// commands), or a job id given to `ag stop` (which stops this machine's daemons).
std::optional<std::string> usage_mistake(CLI::App& app);

// The closest of `candidates` to `word` within a few edits, or "".
std::string closest(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace ag::cli
