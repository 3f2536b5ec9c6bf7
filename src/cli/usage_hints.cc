#include "cli/usage_hints.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <regex>

namespace ag::cli {
namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string closest(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = std::max<size_t>(2, word.size() / 3) + 1;
  for (const auto& candidate : candidates) {
    const size_t d = edit_distance(word, candidate);
    if (d < best_distance) {
      best = candidate;
      best_distance = d;
    }
  }
  return best;
}

std::string meant_command(const std::string& word, const std::vector<std::string>& commands) {
  // What users of other schedulers type for an ag command.
  static const std::pair<const char*, const char*> kSynonyms[] = {
      {"cancel", "stop-job"}, {"kill", "stop-job"},     {"scancel", "stop-job"}, {"delete", "delete-job"},
      {"run", "submit"},      {"sbatch", "submit"},     {"srun", "submit"},      {"jobs", "list-jobs"},
      {"ps", "list-jobs"},    {"squeue", "list-jobs"},  {"queue-list", "list-jobs"}, {"nodes", "list-nodes"},
      {"sinfo", "list-nodes"}, {"log", "logs"},         {"tail", "logs"},        {"info", "status"},
  };
  for (const auto& [synonym, command] : kSynonyms) {
    if (word == synonym && std::find(commands.begin(), commands.end(), command) != commands.end()) return command;
  }
  return closest(word, commands);
}

std::optional<std::string> usage_mistake(CLI::App& app) {
  std::vector<CLI::App*> chosen = app.get_subcommands();
  CLI::App* sub = chosen.empty() ? nullptr : chosen.front();
  const std::vector<std::string> extras = app.remaining(true);
  if (!sub) {
    std::vector<std::string> names;
    for (const CLI::App* command : app.get_subcommands([](CLI::App*) { return true; })) {
      names.push_back(command->get_name());
    }
    for (const auto& extra : extras) {
      if (extra.empty() || extra[0] == '-') continue;
      const std::string guess = meant_command(extra, names);
      if (!guess.empty()) return "unknown command '" + extra + "': did you mean `ag " + guess + "`?";
      std::string list;
      for (const auto& name : names) list += (list.empty() ? "" : ", ") + name;
      return "unknown command '" + extra + "'; the commands are: " + list + " (`ag COMMAND --help` for one)";
    }
    return std::nullopt;
  }
  if (sub->get_name() == "stop") {
    for (const auto& extra : extras) {
      if (extra.rfind("job_", 0) == 0) {
        return "`ag stop` stops the daemons started on this machine and takes no job; to stop a job: ag stop-job " +
               extra;
      }
    }
  }
  return std::nullopt;
}

std::string usage_hint(CLI::App& app, const CLI::ParseError& /*error*/, bool saw_double_dash) {
  std::vector<CLI::App*> chosen = app.get_subcommands();
  CLI::App* sub = chosen.empty() ? nullptr : chosen.front();
  const std::vector<std::string> extras = app.remaining(true);
  if (extras.empty()) return "";
  std::string hint;
  if (!sub) {
    std::vector<std::string> names;
    for (const CLI::App* command : app.get_subcommands([](CLI::App*) { return true; })) {
      names.push_back(command->get_name());
    }
    for (const auto& extra : extras) {
      if (!extra.empty() && extra[0] == '-') continue;
      std::string guess = meant_command(extra, names);
      std::string out = "\nunknown command '";
      out += extra;
      out += guess.empty() ? "': `ag --help` lists the commands" : "': did you mean `ag " + guess + "`?";
      return out;
    }
  }
  std::vector<std::string> flags;
  for (const CLI::Option* option : (sub ? sub : &app)->get_options()) {
    for (const auto& name : option->get_lnames()) flags.push_back("--" + name);
  }
  for (const auto& extra : extras) {
    if (extra.rfind("--", 0) != 0) continue;
    const std::string flag = extra.substr(0, extra.find('='));
    // Options of the whole command line (--address, -o, ...) are known everywhere.
    if (std::find(flags.begin(), flags.end(), flag) != flags.end()) continue;
    bool global = false;
    for (const CLI::Option* option : app.get_options()) {
      for (const auto& name : option->get_lnames()) global = global || "--" + name == flag;
    }
    if (global) continue;
    std::string guess = closest(flag, flags);
    hint = "\nunknown option '";
    hint += flag;
    hint += guess.empty() ? "': `ag " + std::string(sub ? sub->get_name() + " " : "") + "--help` lists the options"
                          : "': did you mean `" + guess + "`?";
    break;
  }
  if (sub && sub->get_name() == "submit" && !saw_double_dash) {
    hint += "\nthe task's command goes after `--`, options before it: ag submit -n 2 -- python train.py --epochs 3";
  }
  return hint;
}

namespace {

// "1024.000000" -> "1024", "0.500000" -> "0.5".
std::string trim_number(std::string text) {
  if (text.find('.') == std::string::npos) return text;
  while (!text.empty() && text.back() == '0') text.pop_back();
  if (!text.empty() && text.back() == '.') text.pop_back();
  return text;
}

bool is_number(const std::string& text) {
  if (text.empty()) return false;
  char* end = nullptr;
  std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size();
}

}  // namespace

std::string plain_value_error(const std::string& message) {
  static const std::regex range(R"(^(-[-\w]+): Value (.*) not in range (\S+) to (\S+)$)");
  static const std::regex conversion(R"(^(?:Could not convert: )?(-[-\w]+) ?[:=] ?(.*)$)");
  std::smatch m;
  if (std::regex_match(message, m, range)) {
    const std::string flag = m[1], value = m[2], low = m[3], high = m[4];
    const bool whole = low.find('.') == std::string::npos && high.find('.') == std::string::npos;
    const std::string kind = whole ? "a whole number" : "a number";
    const std::string bounds = "from " + trim_number(low) + " to " + trim_number(high);
    if (!is_number(value) || (whole && value.find_first_of(".eE") != std::string::npos)) {
      return flag + ": '" + value + "' is not " + kind + "; give one " + bounds;
    }
    return flag + ": " + value + " is out of range; give " + kind + " " + bounds;
  }
  if (message.rfind("Could not convert", 0) == 0 && std::regex_match(message, m, conversion)) {
    return std::string(m[1]) + ": '" + std::string(m[2]) + "' is not a number";
  }
  return message;
}

bool json_requested(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") return false;
    if ((arg == "-o" || arg == "--output") && i + 1 < argc && std::strcmp(argv[i + 1], "json") == 0) return true;
    if (arg == "--output=json" || arg == "-ojson") return true;
  }
  return false;
}

}  // namespace ag::cli
