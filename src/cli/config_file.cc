#include "cli/config_file.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/usage_hints.h"

namespace ag::cli {
namespace {

// The long names (without dashes) of `app`'s options a file may set.
std::vector<std::string> configurable_keys(const CLI::App& app) {
  std::vector<std::string> keys;
  for (const CLI::Option* option : app.get_options()) {
    for (const std::string& name : option->get_lnames()) {
      if (name != "help" && name != "config") keys.push_back(name);
    }
  }
  return keys;
}

// Sets one key of the file on its option, unless the command line set it. Returns
// whether it did; errors say what is wrong with the key and what to do.
Result<bool> apply_item(CLI::App& command, CLI::App& global, const CLI::ConfigItem& item, const std::string& where) {
  if (!item.parents.empty() || item.name == "++" || item.name == "--") {
    return invalid_argument(where + ": sections ([" + (item.parents.empty() ? item.name : item.parents.front()) +
                            "]) are not used; put every key at the top level, one KEY = VALUE a line");
  }
  const std::string& key = item.name;
  if (key == "token") {
    return invalid_argument(where + ": key 'token': a token does not belong in a config file, which is often "
                            "readable by others; put it in a file of mode 0600 and name that file with "
                            "token-file = PATH");
  }
  if (key == "config") {
    return invalid_argument(where + ": key 'config': a config file cannot name another one; remove the key");
  }
  CLI::Option* option = command.get_option_no_throw("--" + key);
  if (option == nullptr && key == "insecure") option = global.get_option_no_throw("--insecure");
  if (option == nullptr) {
    std::vector<std::string> keys = configurable_keys(command);
    keys.emplace_back("insecure");
    const std::string guess = closest(key, keys);
    const std::string command_name = "ag " + command.get_name();
    return invalid_argument(where + ": unknown key '" + key + "'" +
                            (guess.empty() ? "" : " (did you mean '" + guess + "'?)") + "; keys are the long flags of `" +
                            command_name + "` without their dashes (`" + command_name + " --help` lists them)");
  }
  if (option->count() > 0) return false;  // the command line overrides the file
  const std::string fix = "; fix it in " + where.substr(std::string("config file ").size());
  try {
    if (option->get_expected_min() == 0) {
      // A flag: true or false (also on/off, yes/no, 1/0).
      std::string value = CLI::ConfigTOML().to_flag(item);
      static const std::regex boolean("true|false|on|off|yes|no|1|0", std::regex::icase);
      if (!std::regex_match(value, boolean)) {
        return invalid_argument(where + ": key '" + key + "': '" + value + "' is not true or false" + fix);
      }
      option->add_result(option->get_flag_value(key, value));
    } else {
      option->add_result(item.inputs);
    }
    option->run_callback();
  } catch (const CLI::Error& e) {
    std::string problem = plain_value_error(e.what());
    if (problem.rfind("--" + key + ": ", 0) == 0) problem.erase(0, key.size() + 4);
    if (problem.rfind("At Most 1 required", 0) == 0) problem = "it takes one value, not a list";
    return invalid_argument(where + ": key '" + key + "': " + problem + fix + " (a --" + key +
                            " on the command line overrides the file)");
  }
  return true;
}

}  // namespace

Result<std::vector<std::string>> apply_config_file(CLI::App& command, CLI::App& global, const std::string& path) {
  std::vector<std::string> applied;
  const std::string where = "config file " + path;
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec)) {
    return invalid_argument(where + ": cannot read it (not a regular file); give --config the path of a file");
  }
  std::ifstream in(path);
  if (!in) {
    return invalid_argument(where + ": cannot read it (" + std::strerror(errno) +
                            "); check the path given to --config and that this user may read the file");
  }
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    return invalid_argument(where + ": cannot read it (" + std::strerror(errno) + ")");
  }
  std::vector<CLI::ConfigItem> items;
  try {
    items = CLI::ConfigTOML().from_config(text);
  } catch (const CLI::Error& e) {
    return invalid_argument(where + ": " + e.what() + "; it holds KEY = VALUE lines (see the sample files)");
  }
  for (const CLI::ConfigItem& item : items) {
    auto set = apply_item(command, global, item, where);
    if (!set.ok()) return set.error();
    if (set.value()) applied.push_back(item.name);
  }
  return applied;
}

}  // namespace ag::cli
