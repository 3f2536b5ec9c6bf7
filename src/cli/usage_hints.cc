#include "cli/usage_hints.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstring>

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

std::string usage_hint(CLI::App& app, const CLI::ParseError& /*error*/) {
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
      std::string guess = closest(extra, names);
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
    std::string guess = closest(flag, flags);
    if (!guess.empty()) {
      hint = "\nunknown option '";
      hint += flag;
      hint += "': did you mean `" + guess + "`?";
      break;
    }
  }
  if (sub && sub->get_name() == "submit") {
    hint += "\nthe task's command goes after `--`, options before it: ag submit -n 2 -- python train.py --epochs 3";
  }
  return hint;
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
