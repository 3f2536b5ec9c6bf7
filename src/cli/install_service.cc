#include "cli/install_service.h"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <regex>
#include <sstream>

#include "cli/packaged_files.h"

namespace ag::cli {
namespace {

constexpr const char* kPackagedConfigDir = "/etc/aethergrid";
constexpr const char* kPackagedBinary = "/usr/bin/ag ";

void replace_all(std::string& text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
}

Error not_a_setting(const std::string& setting, const std::string& kind) {
  return invalid_argument("--set " + setting + ": give KEY=VALUE, KEY a long flag of `ag start-" + kind +
                          "` without its dashes (e.g. --set node-ip-address=10.0.0.2)");
}

// systemd splits ExecStart= at spaces and reads quotes and specifiers (%, $).
bool safe_in_unit(const std::string& path) {
  static const std::regex safe("[A-Za-z0-9/._+@:=-]+");
  return std::regex_match(path, safe);
}

// A value as the config syntax writes it: numbers and true/false bare, else quoted.
std::string config_value(const std::string& value) {
  static const std::regex bare("true|false|-?[0-9]+(\\.[0-9]+)?");
  if (std::regex_match(value, bare)) return value;
  std::string quoted = "\"";
  for (char c : value) {
    if (c == '"' || c == '\\') quoted.push_back('\\');
    quoted.push_back(c);
  }
  return quoted + "\"";
}

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

Status write_file(const std::string& path, const std::string& text) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  if (ec) return internal_error("cannot create the folder of " + path + ": " + ec.message());
  const std::string temporary = path + ".ag-new";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) return internal_error("cannot write " + temporary);
  }
  ::chmod(temporary.c_str(), 0644);
  std::filesystem::rename(temporary, path, ec);
  if (ec) return internal_error("cannot replace " + path + ": " + ec.message());
  return {};
}

// Puts `key = values` in place of the key's line in the sample `text` (commented out
// or not); a key the sample shows as a list gets a list.
Status set_key(std::string& text, const std::string& kind, const std::string& key,
               const std::vector<std::string>& list) {
  const std::string command = "ag start-" + kind;
  if (key.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") != std::string::npos) {
    return invalid_argument("--set " + key + "=...: " + command + " has no such option (`" + command +
                            " --help` lists them)");
  }
  const std::regex line("(^|\n)#? ?" + key + " = ([^\n]*)");
  std::smatch found;
  if (!std::regex_search(text, found, line)) {
    return invalid_argument("--set " + key + "=...: " + command + " has no option --" + key +
                            " a config file can set (`" + command + " --help` lists them)");
  }
  const bool repeatable = found[2].str().rfind('[', 0) == 0;
  if (list.size() > 1 && !repeatable) {
    return invalid_argument("--set " + key + ": given " + std::to_string(list.size()) + " times, but --" + key +
                            " takes one value");
  }
  std::string value;
  if (repeatable) {
    value = "[";
    for (size_t i = 0; i < list.size(); ++i) {
      if (i > 0) value += ", ";
      value += config_value(list[i]);
    }
    value += "]";
  } else {
    value = config_value(list.front());
  }
  const size_t start = static_cast<size_t>(found.position(0)) + found[1].length();
  text.replace(start, static_cast<size_t>(found.length(0)) - found[1].length(), key + " = " + value);
  return {};
}

}  // namespace

Result<std::string> unit_text(const std::string& kind, const std::string& ag_path, const std::string& config_dir,
                              const std::string& user) {
  for (const std::string& path : {ag_path, config_dir}) {
    if (!safe_in_unit(path)) {
      return invalid_argument("the path " + path + " has characters a systemd command line would split or expand; "
                              "use one of letters, digits and /._+@:=-");
    }
  }
  if (kind == "head" && !safe_in_unit(user)) return invalid_argument("--user " + user + ": not an account name");
  std::string text(kind == "head" ? packaged_files().head_unit : packaged_files().worker_unit);
  replace_all(text, kPackagedBinary, ag_path + " ");
  replace_all(text, kPackagedConfigDir, config_dir);
  if (kind == "head") {
    replace_all(text, "User=aethergrid-head\n", "User=" + user + "\n");
    replace_all(text, "Group=aethergrid-head\n", "Group=" + user + "\n");
  }
  return text;
}

Result<std::string> config_text(const std::string& kind, const std::string& config_dir,
                                const std::vector<std::string>& settings) {
  std::string text(kind == "head" ? packaged_files().head_config : packaged_files().worker_config);
  replace_all(text, kPackagedConfigDir, config_dir);
  // Values by key, in the order given (a repeated key collects a list).
  std::vector<std::pair<std::string, std::vector<std::string>>> values;
  for (const std::string& setting : settings) {
    const size_t eq = setting.find('=');
    if (eq == std::string::npos || eq == 0) return not_a_setting(setting, kind);
    const std::string key = setting.substr(0, eq);
    auto it = std::find_if(values.begin(), values.end(), [&](const auto& v) { return v.first == key; });
    if (it == values.end()) it = values.insert(values.end(), {key, {}});
    it->second.push_back(setting.substr(eq + 1));
  }
  for (const auto& [key, list] : values) {
    if (Status s = set_key(text, kind, key, list); !s) return s.error();
  }
  return text;
}

int install_service(const InstallServiceOptions& options) {
  if (options.kind != "head" && options.kind != "worker") {
    std::cerr << "error: install-service: give head or worker, not '" << options.kind << "'\n";
    return 2;
  }
  std::error_code ec;
  const std::string ag_path = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  if (ec) {
    std::cerr << "error: cannot find this binary's own path (/proc/self/exe): " << ec.message() << "\n";
    return 1;
  }
  const std::string config_dir = std::filesystem::absolute(options.config_dir).lexically_normal().string();
  const std::string unit_dir = std::filesystem::absolute(options.unit_dir).lexically_normal().string();
  auto unit = unit_text(options.kind, ag_path, config_dir, options.user);
  auto config = config_text(options.kind, config_dir, options.settings);
  for (const auto* result : {&unit, &config}) {
    if (!result->ok()) {
      std::cerr << "error: " << result->error().message << "\nNothing was written.\n";
      return 2;
    }
  }
  const std::string unit_path = unit_dir + "/aethergrid-" + options.kind + ".service";
  const std::string config_path = config_dir + "/" + options.kind + ".conf";
  const std::map<std::string, std::string> files{{unit_path, unit.value()}, {config_path, config.value()}};
  // Both checked before either is written: a refusal leaves everything as it was.
  for (const auto& [path, text] : files) {
    auto existing = read_file(path);
    if (existing && *existing != text && !options.force) {
      std::cerr << "error: " << path << " exists and differs from what install-service writes; compare them "
                << "(write elsewhere with --unit-dir/--config-dir) or pass --force to replace it\n"
                << "Nothing was written.\n";
      return 1;
    }
  }
  for (const auto& [path, text] : files) {
    auto existing = read_file(path);
    if (existing && *existing == text) {
      std::cout << "unchanged: " << path << "\n";
      continue;
    }
    if (Status s = write_file(path, text); !s) {
      std::cerr << "error: " << s.error().message << "\n";
      return 1;
    }
    std::cout << (existing ? "replaced: " : "wrote: ") << path << "\n";
  }
  std::cout << "\nNext:\n";
  if (options.kind == "head" && options.user != "root" && ::getpwnam(options.user.c_str()) == nullptr) {
    std::cout << "  useradd --system --home-dir /var/lib/aethergrid --shell /usr/sbin/nologin " << options.user
              << "   # the head's account (or install with --user root)\n";
  }
  if (options.kind == "worker") {
    std::cout << "  (umask 077; echo JOIN_TOKEN > " << config_dir << "/join-token)   # the token `ag start-head` "
              << "printed, if the config's token-file is that file\n";
  }
  std::cout << "  edit " << config_path << " (" << (options.kind == "worker" ? "head-node, " : "")
            << "node-ip-address, ...)\n"
            << "  systemctl daemon-reload && systemctl enable --now aethergrid-" << options.kind << "\n";
  return 0;
}

}  // namespace ag::cli
