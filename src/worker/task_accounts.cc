#include "worker/task_accounts.h"

#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
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
  if (!in) return {};  // none given yet
  auto doc = nlohmann::json::parse(in, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("accounts") || !doc["accounts"].is_object()) {
    return internal_error(path + " is not what this worker writes (an object of users' account numbers); "
                                 "move it aside to give every user a new number");
  }
  for (const auto& [owner, uid] : doc["accounts"].items()) {
    if (!uid.is_number_unsigned() || uid.get<uint64_t>() < kFirstTaskUid ||
        uid.get<uint64_t>() >= uint64_t{kFirstTaskUid} + kTaskUidCount) {
      return internal_error(path + ": the number for user '" + owner + "' is outside the range tasks run in");
    }
    uids_[owner] = uid.get<uid_t>();
  }
  return {};
}

Status TaskAccounts::save() const {
  nlohmann::json doc = {{"accounts", nlohmann::json::object()}};
  for (const auto& [owner, uid] : uids_) doc["accounts"][owner] = uid;
  const std::string path = data_dir_ + "/task-accounts.json";
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << doc.dump(1) << "\n";
    out.flush();
    if (!out) return internal_error("cannot write " + tmp);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    return internal_error("cannot keep the users' account numbers in " + path + ": " + std::strerror(errno));
  }
  return {};
}

Result<uid_t> TaskAccounts::allocate() {
  uid_t next = kFirstTaskUid;
  for (const auto& [owner, uid] : uids_) next = std::max(next, uid + 1);
  for (uint32_t tried = 0; tried < kTaskUidCount; ++tried, ++next) {
    if (next >= kFirstTaskUid + kTaskUidCount) next = kFirstTaskUid;  // freed numbers at the start
    bool taken = false;
    for (const auto& [owner, uid] : uids_) taken = taken || uid == next;
    if (!taken && !uid_held(next) && !gid_held(next)) return next;
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
