#include "cli/command_line.h"

#include <CLI/CLI.hpp>

namespace ag::cli {

void add_connection_options(CLI::App& app, ConnectionOptions& options) {
  app.add_option("--address", options.address,
                 "Head address HOST:PORT (default: AG_ADDRESS, then this machine's session)");
  app.add_option("--token", options.token, "Your token (prefer --token-file: a command line is visible in `ps`)");
  app.add_option("--token-file", options.token_file,
                 "File holding your token, mode 0600 (default: AG_TOKEN, AG_TOKEN_FILE, then this machine's session)");
  app.add_option("--output,-o", options.output, "Output format")->check(CLI::IsMember({"table", "json"}));
  app.add_flag("--insecure", options.insecure, "Talk to the head in plain HTTP, even on another machine (no TLS)");
}

namespace {

// Whether `word` is one of `app`'s own options that takes its value from the next word
// ("--address" but not "--address=h:1", "-o" but not "-ojson", not "--insecure").
bool takes_next_word(const CLI::App& app, const std::string& word) {
  const bool is_long = word.rfind("--", 0) == 0;
  if (is_long ? word.find('=') != std::string::npos : word.size() != 2) return false;
  const CLI::Option* option = app.get_option_no_throw(word);
  return option != nullptr && option->get_items_expected_max() > 0;
}

}  // namespace

size_t trailing_command_start(const CLI::App& app, const std::vector<std::string>& args,
                              const std::vector<TrailingCommand>& trailing) {
  size_t i = 1;
  while (i < args.size() && args[i] != "--" && args[i].size() > 1 && args[i][0] == '-') {
    i += takes_next_word(app, args[i]) ? 2 : 1;
  }
  if (i >= args.size()) return args.size();
  bool takes_command = false;
  for (const auto& command : trailing) takes_command = takes_command || command.name == args[i];
  if (!takes_command) return args.size();
  for (size_t k = i + 1; k < args.size(); ++k) {
    if (args[k] == "--") return k;
  }
  return args.size();
}

void parse_command_line(CLI::App& app, const std::vector<std::string>& args,
                        const std::vector<TrailingCommand>& trailing) {
  const size_t cut = trailing_command_start(app, args, trailing);
  std::vector<std::string> reversed;  // what CLI11 parses, last word first
  for (size_t k = cut; k-- > 1;) reversed.push_back(args[k]);
  app.parse(std::move(reversed));
  if (cut == args.size()) return;
  for (const auto& command : trailing) {
    if (!app.got_subcommand(command.name)) continue;
    if (!command.words->empty()) {
      std::string before;
      for (const auto& word : *command.words) before += (before.empty() ? "" : " ") + word;
      throw CLI::ValidationError("the command",
                                 "'" + before + "' stands before `--` and more after it; put the whole command after "
                                 "`--` and ag's options before it: ag " + command.name +
                                     " -n 2 -- python train.py --epochs 3");
    }
    command.words->assign(args.begin() + static_cast<std::ptrdiff_t>(cut) + 1, args.end());
  }
}

}  // namespace ag::cli
