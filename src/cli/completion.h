// `ag completion bash|zsh`: a shell script that completes ag's commands and flags,
// made from the parser's own definitions so it never falls behind them.
//
//   source <(ag completion bash)        # in ~/.bashrc
//   source <(ag completion zsh)         # in ~/.zshrc (through zsh's bashcompinit)
#pragma once

#include <optional>
#include <string>

namespace CLI {
class App;
}  // namespace CLI

namespace ag::cli {

// The script for `shell` ("bash" or "zsh"), or nullopt for another shell.
std::optional<std::string> completion_script(CLI::App& app, const std::string& shell);

}  // namespace ag::cli
