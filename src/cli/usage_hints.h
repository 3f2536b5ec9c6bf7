// What `ag` adds to a command line it refused: the subcommand or flag the user
// probably meant ("did you mean `submit`?"), and for `ag submit` a reminder to put the
// task's command after `--`.
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
class ParseError;
}  // namespace CLI

namespace ag::cli {

// "" or "\n" followed by the hint.
std::string usage_hint(CLI::App& app, const CLI::ParseError& error);

// Whether the command line asks for JSON output (-o json, --output json, --output=json),
// read before the parser has (for its own errors).
bool json_requested(int argc, char** argv);

// The closest of `candidates` to `word` within a few edits, or "".
std::string closest(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace ag::cli
