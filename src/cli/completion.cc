#include "cli/completion.h"

#include <CLI/CLI.hpp>

namespace ag::cli {
namespace {

// Every flag of `command` (long and short forms), space-separated.
std::string flags_of(const CLI::App& command) {
  std::string out;
  for (const CLI::Option* option : command.get_options()) {
    for (const auto& name : option->get_lnames()) out += " --" + name;
    for (const auto& name : option->get_snames()) out += " -" + name;
  }
  return out;
}

std::string names_of_subcommands(const CLI::App& command) {
  std::string out;
  for (const CLI::App* sub : command.get_subcommands([](const CLI::App*) { return true; })) {
    out += " " + sub->get_name();
  }
  return out;
}

std::string bash_script(CLI::App& app) {
  std::string cases;
  for (CLI::App* command : app.get_subcommands([](CLI::App*) { return true; })) {
    const std::string& name = command->get_name();
    // A command with subcommands of its own (ag user add) offers their names first.
    cases += "    " + name + ") words=\"" + names_of_subcommands(*command) + flags_of(*command) + "\" ;;\n";
  }
  std::string script =
      "# Completion of AetherGrid's `ag` for bash. Load it with: source <(ag completion bash)\n"
      "_ag() {\n"
      "  local cur=\"${COMP_WORDS[COMP_CWORD]}\" cmd=\"\" i word words\n"
      "  local commands=\"" + names_of_subcommands(app) + "\"\n"
      "  local globals=\"" + flags_of(app) + "\"\n"
      "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
      "    word=\"${COMP_WORDS[i]}\"\n"
      "    # After `--` comes the task's command: file names.\n"
      "    [[ $word == -- ]] && return 0\n"
      "    if [[ -z $cmd && \" $commands \" == *\" $word \"* ]]; then cmd=$word; fi\n"
      "  done\n"
      "  case \"$cmd\" in\n"
      "    \"\") words=\"$commands\" ;;\n" +
      cases +
      "  esac\n"
      "  [[ $cur == -* ]] && words=\"$words $globals\"\n"
      "  COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n"
      "}\n"
      "complete -o default -F _ag ag\n";
  return script;
}

}  // namespace

std::optional<std::string> completion_script(CLI::App& app, const std::string& shell) {
  if (shell == "bash") return bash_script(app);
  if (shell == "zsh") {
    return "# Completion of AetherGrid's `ag` for zsh. Load it with: source <(ag completion zsh)\n"
           "autoload -U +X compinit && compinit\n"
           "autoload -U +X bashcompinit && bashcompinit\n" +
           bash_script(app);
  }
  return std::nullopt;
}

}  // namespace ag::cli
