#include "worker/exec_helper.h"

#include <grp.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "worker/task_cgroup.h"

extern char** environ;

namespace ag::worker {

using nlohmann::json;

std::string encode_exec_orders(const ExecOrders& o) {
  json j{{"cgroups", o.cgroups}, {"switch_user", o.switch_user}, {"uid", o.uid}, {"gid", o.gid},
         {"groups", o.groups}, {"dir", o.dir}, {"command", o.command}, {"env", o.env},
         {"terminal", o.terminal}};
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<ExecOrders> decode_exec_orders(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  if (!j.is_object()) return invalid_argument("exec orders: not a JSON object");
  try {
    ExecOrders o;
    o.cgroups = j.at("cgroups").get<std::vector<std::string>>();
    o.switch_user = j.at("switch_user").get<bool>();
    o.uid = j.at("uid").get<uid_t>();
    o.gid = j.at("gid").get<gid_t>();
    o.groups = j.at("groups").get<std::vector<gid_t>>();
    o.dir = j.at("dir").get<std::string>();
    o.command = j.at("command").get<std::vector<std::string>>();
    o.env = j.at("env").get<std::vector<std::string>>();
    o.terminal = j.value("terminal", false);
    return o;
  } catch (const json::exception& e) {
    return invalid_argument(std::string("exec orders: ") + e.what());
  }
}

Result<ExecOrders> orders_beside(int64_t pid, std::vector<std::string> command, std::vector<std::string> cgroups) {
  const std::string proc = "/proc/" + std::to_string(pid);
  ExecOrders o;
  o.command = std::move(command);
  o.cgroups = std::move(cgroups);
  std::ifstream environ_file(proc + "/environ");
  if (!environ_file) return not_found("the task's process " + std::to_string(pid) + " is gone");
  for (std::string entry; std::getline(environ_file, entry, '\0');) {
    if (!entry.empty()) o.env.push_back(entry);
  }
  std::ifstream status(proc + "/status");
  for (std::string line; std::getline(status, line);) {
    std::istringstream fields(line);
    std::string key;
    fields >> key;
    if (key == "Uid:") fields >> o.uid;
    if (key == "Gid:") fields >> o.gid;
    if (key == "Groups:") {
      for (gid_t g; fields >> g;) o.groups.push_back(g);
    }
  }
  char dir[4096];
  const ssize_t n = ::readlink((proc + "/cwd").c_str(), dir, sizeof dir - 1);
  o.dir = n > 0 ? std::string(dir, static_cast<size_t>(n)) : "/";
  o.switch_user = ::geteuid() == 0 && (o.uid != ::geteuid() || o.gid != ::getegid());
  return o;
}

void run_exec_helper(int orders_fd) {
  std::string text;
  char buffer[65536];
  for (ssize_t n; (n = ::read(orders_fd, buffer, sizeof buffer)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  ::close(orders_fd);
  auto orders = decode_exec_orders(text);
  if (!orders.ok() || orders.value().command.empty()) {
    std::fprintf(stderr, "ag exec: %s\n", orders.ok() ? "no command" : orders.error().message.c_str());
    ::_exit(126);
  }
  ExecOrders& o = orders.value();
  for (const auto& group : o.cgroups) join_cgroup(group.c_str());
  const char* step = nullptr;
  if (!o.terminal) {
    ::setpgid(0, 0);
  } else if (::setsid() < 0) {
    step = "setsid";
  } else if (::ioctl(0, TIOCSCTTY, 0) != 0) {
    step = "TIOCSCTTY";
  }
  if (step) {
    std::fprintf(stderr, "ag exec: cannot take the terminal: %s: %s\n", step, std::strerror(errno));
    ::_exit(126);
  }
  if (o.switch_user) {
    if (::setgroups(o.groups.size(), o.groups.data()) != 0) step = "setgroups";
    else if (::setgid(o.gid) != 0) step = "setgid";
    else if (::setuid(o.uid) != 0) step = "setuid";
  }
  if (step) {
    std::fprintf(stderr, "ag exec: cannot become uid %u: %s: %s\n", o.uid, step, std::strerror(errno));
    ::_exit(126);
  }
  if (::chdir(o.dir.c_str()) != 0) {
    std::fprintf(stderr, "ag exec: cannot enter %s: %s\n", o.dir.c_str(), std::strerror(errno));
    ::_exit(126);
  }
  std::vector<char*> argv, envp;
  for (auto& arg : o.command) argv.push_back(arg.data());
  argv.push_back(nullptr);
  for (auto& entry : o.env) envp.push_back(entry.data());
  envp.push_back(nullptr);
  // The command is looked up on the task's PATH.
  environ = envp.data();
  ::execvp(argv[0], argv.data());
  int error = errno;
  // execvp says "permission denied" when any folder of PATH was closed to the user,
  // even where the command is in none of them: that is "not found".
  if (error == EACCES && std::strchr(argv[0], '/') == nullptr) {
    bool anywhere = false;
    const char* path = std::getenv("PATH");
    std::string dirs = path ? path : "/usr/bin:/bin";
    for (size_t start = 0; start <= dirs.size() && !anywhere;) {
      size_t colon = dirs.find(':', start);
      std::string dir = dirs.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
      anywhere = ::access(((dir.empty() ? "." : dir) + "/" + argv[0]).c_str(), F_OK) == 0;
      if (colon == std::string::npos) break;
      start = colon + 1;
    }
    if (!anywhere) error = ENOENT;
  }
  if (error == ENOENT) {
    std::fprintf(stderr, "ag exec: %s: command not found\n", argv[0]);
  } else {
    std::fprintf(stderr, "ag exec: %s: %s\n", argv[0], std::strerror(error));
  }
  ::_exit(error == ENOENT || error == ENOTDIR ? 127 : 126);
}

}  // namespace ag::worker
