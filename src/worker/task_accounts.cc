#include "worker/task_accounts.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <vector>

namespace ag::worker {
namespace {

bool uid_held(uid_t uid) {
  struct passwd pw {};
  struct passwd* found = nullptr;
  std::vector<char> buf(16384);
  return ::getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found;
}

bool gid_held(gid_t gid) {
  struct group gr {};
  struct group* found = nullptr;
  std::vector<char> buf(65536);
  return ::getgrgid_r(gid, &gr, buf.data(), buf.size(), &found) == 0 && found;
}

std::optional<gid_t> group_named(const char* name) {
  struct group gr {};
  struct group* found = nullptr;
  std::vector<char> buf(65536);
  if (::getgrnam_r(name, &gr, buf.data(), buf.size(), &found) != 0 || !found) return std::nullopt;
  return gr.gr_gid;
}

// Writes `text` to `path` (0600) so that it survives a crash: a temporary file,
// synced, renamed over it, and the folder synced.
Status write_durably(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return internal_error("cannot write " + tmp + ": " + std::strerror(errno));
  size_t written = 0;
  while (written < text.size()) {
    ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    written += static_cast<size_t>(n);
  }
  const bool ok = written == text.size() && ::fsync(fd) == 0;
  const std::string why = std::strerror(errno);
  ::close(fd);
  if (!ok) return internal_error("cannot write " + tmp + ": " + why);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    return internal_error("cannot keep " + path + ": " + std::strerror(errno));
  }
  const std::string dir = std::filesystem::path(path).parent_path().string();
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return {};
}

}  // namespace

std::string task_account_name(const std::string& owner) {
  if (owner.empty()) return "ag-anonymous";
  std::string name = "ag-";
  for (char c : owner.substr(0, 29)) {
    name += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') ? c : '_';
  }
  return name;
}

Result<std::unique_ptr<TaskAccounts>> TaskAccounts::open(const std::string& data_dir, const std::string& task_user,
                                                         std::string* note) {
  if (!task_user.empty()) {
    auto shared = resolve_task_user(task_user, note);
    if (!shared.ok()) return shared.error();
    if (shared.value()) *note += "; jobs of different users can read each other's files (leave out --task-user "
                                 "to give each user an account of their own)";
    return std::unique_ptr<TaskAccounts>(new TaskAccounts(data_dir, false, std::move(shared.value())));
  }
  if (::geteuid() != 0) {
    *note = "tasks run as this worker's own user (uid " + std::to_string(::geteuid()) +
            "); a worker running as root gives each user's tasks an account of their own";
    return std::unique_ptr<TaskAccounts>(new TaskAccounts(data_dir, false, std::nullopt));
  }
  std::unique_ptr<TaskAccounts> accounts(new TaskAccounts(data_dir, true, std::nullopt));
  for (const char* name : {"video", "render"}) {
    if (auto gid = group_named(name)) accounts->device_groups_.push_back(*gid);
  }
  if (Status s = accounts->load(); !s) return s.error();
  *note = "each user's tasks run as an account of their own (uids from " + std::to_string(kFirstTaskUid) +
          ", homes in " + data_dir + "/homes); --task-user NAME runs every task as NAME instead";
  return accounts;
}

Status TaskAccounts::load() {
  const std::string path = data_dir_ + "/task-accounts.json";
  std::ifstream in(path);
  if (in) {
    auto doc = nlohmann::json::parse(in, nullptr, false);
    if (!doc.is_discarded() && doc.is_object() && doc.contains("accounts") && doc["accounts"].is_object()) {
      for (const auto& [owner, uid] : doc["accounts"].items()) {
        if (!uid.is_number_unsigned() || uid.get<uint64_t>() < kFirstTaskUid ||
            uid.get<uint64_t>() >= uint64_t{kFirstTaskUid} + kTaskUidCount) {
          return internal_error(path + ": the number for user '" + owner + "' is outside the range tasks run in");
        }
        uids_[owner] = uid.get<uid_t>();
      }
    } else {
      spdlog::warn("{} is not what this worker writes; the users' account numbers are read from {}/homes/*.owner",
                   path, data_dir_);
    }
  }
  // Each home's owner, kept beside it when it was made: the word that counts when the
  // list was lost or is older than the homes (a crash between the two writes).
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(data_dir_ + "/homes", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() <= 6 || name.substr(name.size() - 6) != ".owner") continue;
    const std::string number = name.substr(0, name.size() - 6);
    if (number.empty() || !std::all_of(number.begin(), number.end(), ::isdigit) || number.size() > 10) continue;
    const uid_t uid = static_cast<uid_t>(std::stoull(number));
    std::ifstream marker(entry.path());
    std::string owner((std::istreambuf_iterator<char>(marker)), std::istreambuf_iterator<char>());
    if (auto it = uids_.find(owner); it != uids_.end() && it->second != uid) {
      return internal_error("user '" + owner + "' has account " + std::to_string(it->second) + " in " + path +
                            " but home " + std::to_string(uid) + " in " + data_dir_ +
                            "/homes; remove the one that is wrong (and its home) to go on");
    }
    for (const auto& [other, other_uid] : uids_) {
      if (other_uid == uid && other != owner) {
        return internal_error("account " + std::to_string(uid) + " belongs to user '" + owner + "' (" + entry.path().string() +
                              ") but " + path + " gives it to '" + other + "'; remove the one that is wrong to go on");
      }
    }
    uids_[owner] = uid;
  }
  return {};
}

Status TaskAccounts::save() const {
  nlohmann::json doc = {{"accounts", nlohmann::json::object()}};
  for (const auto& [owner, uid] : uids_) doc["accounts"][owner] = uid;
  return write_durably(data_dir_ + "/task-accounts.json", doc.dump(1) + "\n");
}

Result<uid_t> TaskAccounts::allocate() {
  uid_t next = kFirstTaskUid;
  for (const auto& [owner, uid] : uids_) next = std::max(next, uid + 1);
  for (uint32_t tried = 0; tried < kTaskUidCount; ++tried, ++next) {
    if (next >= kFirstTaskUid + kTaskUidCount) next = kFirstTaskUid;  // freed numbers at the start
    bool taken = false;
    for (const auto& [owner, uid] : uids_) taken = taken || uid == next;
    // A number whose home is still here is someone's, whatever the list says.
    if (!taken && !uid_held(next) && !gid_held(next) &&
        !std::filesystem::exists(data_dir_ + "/homes/" + std::to_string(next))) {
      return next;
    }
  }
  return Error{ErrorCode::kResourceExhausted, "every account number from " + std::to_string(kFirstTaskUid) + " on (" +
                                                  std::to_string(kTaskUidCount) + ") is taken on this machine"};
}

TaskUser TaskAccounts::account(const std::string& owner, uid_t uid) const {
  TaskUser user{task_account_name(owner), uid, uid, {uid}, data_dir_ + "/homes/" + std::to_string(uid)};
  user.groups.insert(user.groups.end(), device_groups_.begin(), device_groups_.end());
  return user;
}

Result<std::optional<TaskUser>> TaskAccounts::for_owner(const std::string& owner) {
  if (!per_user_) return shared_;
  std::lock_guard lock(mu_);
  auto it = uids_.find(owner);
  if (it == uids_.end()) {
    auto uid = allocate();
    if (!uid.ok()) return uid.error();
    it = uids_.emplace(owner, uid.value()).first;
    if (Status s = save(); !s) {
      uids_.erase(it);
      return s.error();
    }
  }
  TaskUser user = account(owner, it->second);
  if (!home_ready_[user.uid]) {
    // Crossed by every account, listed by none; each home is its owner's alone.
    const std::string homes = data_dir_ + "/homes";
    if (::mkdir(homes.c_str(), 0711) != 0 && errno != EEXIST) {
      return internal_error("cannot create " + homes + ": " + std::strerror(errno));
    }
    ::chmod(homes.c_str(), 0711);
    // Whose home it is, beside it (root's, out of the account's reach), before the home.
    if (Status s = write_durably(user.home + ".owner", owner); !s) return s.error();
    if (::mkdir(user.home.c_str(), 0700) != 0 && errno != EEXIST) {
      return internal_error("cannot create " + user.home + ": " + std::strerror(errno));
    }
    if (::chmod(user.home.c_str(), 0700) != 0) {
      return internal_error("cannot make " + user.home + " private: " + std::strerror(errno));
    }
    if (Status s = give_to_task_user(user.home, user, false); !s) return s.error();
    home_ready_[user.uid] = true;
  }
  return std::optional<TaskUser>(std::move(user));
}

std::optional<TaskUser> TaskAccounts::representative() const {
  if (!per_user_) return shared_;
  return TaskUser{"ag-*", kFirstTaskUid, kFirstTaskUid, {}, data_dir_ + "/homes"};
}

}  // namespace ag::worker
