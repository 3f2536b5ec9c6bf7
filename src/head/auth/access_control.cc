#include "head/auth/access_control.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>

#include "common/ids.h"
#include "common/sha256.h"

namespace ag::head {
namespace {

using nlohmann::json;

constexpr const char* kUsersTable = "users";
constexpr const char* kJoinTokensTable = "join_tokens";
constexpr const char* kNodeCredentialsTable = "node_credentials";
constexpr const char* kSessionsTable = "sessions";
constexpr const char* kCookieNameKey = "access.cookie_name";
// Live dashboard sessions one user may hold; signing in once more ends the oldest.
constexpr size_t kMaxSessionsPerUser = 64;
// Every change to users takes turns with every other: each is checked against the
// users as stored (e.g. the last enabled admin), never against a change still in flight.
constexpr const char* kUsersTurn = "users";

std::string hash_token(std::string_view token) { return sha256_hex(token); }

std::string new_token(const char* prefix) { return std::string(prefix) + random_hex(24); }

json user_to_json(const UserRecord& u) {
  return {{"name", u.name},          {"role", to_string(u.role)}, {"groups", u.groups},
          {"token_hash", u.token_hash}, {"disabled", u.disabled}, {"created_ms", u.created_ms},
          {"token_issued_ms", u.token_issued_ms}, {"created_by", u.created_by}};
}

UserRecord user_from_json(const json& j) {
  UserRecord u;
  u.name = j.at("name").get<std::string>();
  u.role = parse_role(j.at("role").get<std::string>()).value_or(Role::kViewer);
  u.groups = j.at("groups").get<std::vector<std::string>>();
  u.token_hash = j.at("token_hash").get<std::string>();
  u.disabled = j.at("disabled").get<bool>();
  u.created_ms = j.at("created_ms").get<int64_t>();
  u.token_issued_ms = j.at("token_issued_ms").get<int64_t>();
  u.created_by = j.at("created_by").get<std::string>();
  return u;
}

json join_to_json(const JoinTokenRecord& t) {
  return {{"id", t.id}, {"token_hash", t.token_hash}, {"created_ms", t.created_ms},
          {"expires_ms", t.expires_ms}, {"created_by", t.created_by}};
}

JoinTokenRecord join_from_json(const json& j) {
  return {j.at("id").get<std::string>(), j.at("token_hash").get<std::string>(), j.at("created_ms").get<int64_t>(),
          j.at("expires_ms").get<int64_t>(), j.at("created_by").get<std::string>()};
}

}  // namespace

std::string to_string(Role role) {
  switch (role) {
    case Role::kAdmin: return "admin";
    case Role::kUser: return "user";
    case Role::kViewer: return "viewer";
  }
  return "viewer";
}

std::optional<Role> parse_role(std::string_view text) {
  if (text == "admin") return Role::kAdmin;
  if (text == "user") return Role::kUser;
  if (text == "viewer") return Role::kViewer;
  return std::nullopt;
}

bool may_submit(const Principal& who) { return who.is_user() && who.role != Role::kViewer; }

bool may_read_status(const Principal& who) { return who.is_user(); }

bool may_act_on_job(const Principal& who, const std::string& owner, const std::vector<std::string>& owner_groups) {
  if (!who.is_user()) return false;
  if (who.role == Role::kAdmin) return true;
  if (who.role == Role::kViewer) return false;
  if (!owner.empty() && who.name == owner) return true;
  return std::any_of(who.groups.begin(), who.groups.end(), [&](const std::string& g) {
    return std::find(owner_groups.begin(), owner_groups.end(), g) != owner_groups.end();
  });
}

Status check_account_name(const std::string& what, const std::string& name) {
  bool ok = !name.empty() && name.size() <= 32 && name[0] >= 'a' && name[0] <= 'z' &&
            std::all_of(name.begin(), name.end(), [](char c) {
              return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
            });
  if (ok) return {};
  return invalid_argument(what + " '" + name +
                          "' is not valid: use 1 to 32 lowercase letters, digits, '_' or '-', starting with a letter");
}

Status AccessControl::recover() {
  auto cookie = deps_.store.get(store::kMetaTable, kCookieNameKey);
  if (!cookie.ok()) return cookie.error();
  if (cookie.value()) cookie_name_ = *cookie.value();
  try {
    auto users = deps_.store.scan(kUsersTable);
    if (!users.ok()) return users.error();
    for (const auto& [_, value] : users.value()) {
      UserRecord user = user_from_json(json::parse(value));
      index_user(user);
      users_[user.name] = std::move(user);
    }
    auto joins = deps_.store.scan(kJoinTokensTable);
    if (!joins.ok()) return joins.error();
    for (const auto& [_, value] : joins.value()) {
      JoinTokenRecord t = join_from_json(json::parse(value));
      by_hash_[t.token_hash] = {Kind::kJoin, t.id};
      join_tokens_[t.id] = std::move(t);
    }
    auto nodes = deps_.store.scan(kNodeCredentialsTable);
    if (!nodes.ok()) return nodes.error();
    for (const auto& [_, value] : nodes.value()) {
      json j = json::parse(value);
      NodeCredentialRecord c{j.at("node_id").get<std::string>(), j.at("token_hash").get<std::string>(),
                             j.at("issued_ms").get<int64_t>()};
      by_hash_[c.token_hash] = {Kind::kNode, c.node_id};
      node_credentials_[c.node_id] = std::move(c);
    }
    auto sessions = deps_.store.scan(kSessionsTable);
    if (!sessions.ok()) return sessions.error();
    for (const auto& [hash, value] : sessions.value()) {
      json j = json::parse(value);
      sessions_[hash] = {j.at("user").get<std::string>(), j.at("expires_ms").get<int64_t>()};
    }
  } catch (const json::exception& e) {
    return internal_error(std::string("a stored credential record is malformed: ") + e.what());
  }
  return {};
}

Status AccessControl::bootstrap(const std::string& admin_token, const std::optional<std::string>& new_join_token) {
  int64_t now = deps_.clock.now_ms();
  std::vector<store::Mutation> batch;
  std::optional<UserRecord> admin;
  if (users_.empty()) {
    admin = UserRecord{"admin", Role::kAdmin, {}, hash_token(admin_token), false, now, now, "start-head"};
    batch.push_back(user_mutation(*admin));
  }
  std::optional<JoinTokenRecord> join;
  if (new_join_token) {
    join = JoinTokenRecord{"join_" + random_hex(4), hash_token(*new_join_token), now, 0, "start-head"};
    batch.push_back({kJoinTokensTable, join->id, join_to_json(*join).dump()});
  }
  std::string cookie_name = cookie_name_;
  if (cookie_name == "ag_session") {
    cookie_name = "ag_session_" + random_hex(6);
    batch.push_back({store::kMetaTable, kCookieNameKey, cookie_name});
  }
  if (batch.empty()) return {};
  auto result = std::make_shared<Status>();
  deps_.store.write(std::move(batch), [result](Status s) { *result = std::move(s); });
  deps_.store.flush();
  if (!*result) return *result;
  cookie_name_ = cookie_name;
  if (admin) {
    index_user(*admin);
    users_[admin->name] = std::move(*admin);
  }
  if (join) {
    by_hash_[join->token_hash] = {Kind::kJoin, join->id};
    join_tokens_[join->id] = std::move(*join);
  }
  return {};
}

Principal AccessControl::authenticate_token(std::string_view token) const {
  Principal who;
  if (token.empty()) {
    who.refusal = "no token";
    return who;
  }
  auto it = by_hash_.find(hash_token(token));
  if (it == by_hash_.end()) {
    who.refusal = "unknown or revoked token";
    return who;
  }
  const IndexEntry& entry = it->second;
  switch (entry.kind) {
    case Kind::kUser: {
      const UserRecord& user = users_.at(entry.name);
      if (user.disabled) {
        who.refusal = "user '" + user.name + "' is disabled; an admin can enable it with `ag user enable " + user.name + "`";
        return who;
      }
      who.kind = Principal::Kind::kUser;
      who.name = user.name;
      who.role = user.role;
      who.groups = user.groups;
      return who;
    }
    case Kind::kJoin: {
      const JoinTokenRecord& join = join_tokens_.at(entry.name);
      if (join.expires_ms != 0 && join.expires_ms <= deps_.clock.now_ms()) {
        who.refusal = "join token " + join.id + " has expired; make a new one with `ag token create --join`";
        return who;
      }
      who.kind = Principal::Kind::kJoin;
      who.name = join.id;
      return who;
    }
    case Kind::kNode:
      who.kind = Principal::Kind::kNode;
      who.name = entry.name;
      return who;
  }
  return who;
}

Principal AccessControl::authenticate_session(std::string_view session) const {
  Principal who;
  std::string hash = hash_token(session);
  auto it = sessions_.find(hash);
  if (session.empty() || it == sessions_.end() || it->second.expires_ms <= deps_.clock.now_ms()) {
    who.refusal = "the dashboard session has ended; sign in again";
    return who;
  }
  auto user = users_.find(it->second.user);
  if (user == users_.end() || user->second.disabled) {
    who.refusal = "user '" + it->second.user + "' is disabled";
    return who;
  }
  who.kind = Principal::Kind::kUser;
  who.name = user->second.name;
  who.role = user->second.role;
  who.groups = user->second.groups;
  who.session_hash = hash;
  return who;
}

template <typename T>
void AccessControl::in_turn(const std::string& key, const Done<T>& done, std::function<void(const Done<T>&)> change) {
  turns_.take(key, [done, change = std::move(change)](const Turns::Ended& ended) {
    change([done, ended](Result<T> result) {
      done(std::move(result));
      ended();
    });
  });
}

void AccessControl::commit(std::vector<store::Mutation> batch, std::function<void()> undo,
                           std::function<void(Status)> done) {
  auto alive = alive_;
  deps_.store.write(std::move(batch), [this, alive, undo = std::move(undo), done = std::move(done)](const Status& status) {
    deps_.timers.post([alive, undo, done, status] {
      if (!*alive) return;
      if (!status) {
        spdlog::error("a credential change could not be stored: {}", status.error().message);
        if (undo) undo();
      }
      done(status);
    });
  });
}

store::Mutation AccessControl::user_mutation(const UserRecord& user) const {
  return {kUsersTable, user.name, user_to_json(user).dump()};
}

void AccessControl::index_user(const UserRecord& user) { by_hash_[user.token_hash] = {Kind::kUser, user.name}; }

void AccessControl::restore_sessions(const std::vector<std::pair<std::string, Session>>& ended) {
  for (const auto& [hash, session] : ended) sessions_[hash] = session;
}

int AccessControl::enabled_admins() const {
  return static_cast<int>(std::count_if(users_.begin(), users_.end(), [](const auto& entry) {
    return entry.second.role == Role::kAdmin && !entry.second.disabled;
  }));
}

std::vector<std::pair<std::string, AccessControl::Session>> AccessControl::end_sessions_of(
    const std::string& user, std::vector<store::Mutation>* batch) {
  std::vector<std::pair<std::string, Session>> ended;
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    if (it->second.user == user) {
      batch->push_back({kSessionsTable, it->first, std::nullopt});
      ended.emplace_back(it->first, it->second);
      it = sessions_.erase(it);
    } else {
      ++it;
    }
  }
  return ended;
}

void AccessControl::add_user(UserRecord user, const Done<std::string>& done) {
  in_turn<std::string>(kUsersTurn, done, [this, user = std::move(user)](const Done<std::string>& done) mutable {
    if (Status s = check_account_name("user name", user.name); !s) return done(s.error());
    for (const auto& group : user.groups) {
      if (Status s = check_account_name("group name", group); !s) return done(s.error());
    }
    if (users_.count(user.name)) {
      return done(Error{ErrorCode::kConflict, "user '" + user.name + "' already exists; see `ag user list`"});
    }
    std::string token = new_token("agu_");
    user.token_hash = hash_token(token);
    user.created_ms = user.token_issued_ms = deps_.clock.now_ms();
    user.disabled = false;
    std::string name = user.name;
    std::string hash = user.token_hash;
    index_user(user);
    auto batch = std::vector<store::Mutation>{user_mutation(user)};
    users_[name] = std::move(user);
    commit(
        std::move(batch),
        [this, name, hash] {
          users_.erase(name);
          by_hash_.erase(hash);
        },
        [done, token](const Status& s) {
          if (!s) return done(s.error());
          done(token);
        });
  });
}

void AccessControl::rotate_user(const std::string& name, const Done<std::string>& done) {
  in_turn<std::string>(kUsersTurn, done, [this, name](const Done<std::string>& done) {
    auto it = users_.find(name);
    if (it == users_.end()) return done(not_found("no user '" + name + "'; see `ag user list`"));
    UserRecord before = it->second;
    std::string token = new_token("agu_");
    by_hash_.erase(before.token_hash);
    it->second.token_hash = hash_token(token);
    it->second.token_issued_ms = deps_.clock.now_ms();
    index_user(it->second);
    std::vector<store::Mutation> batch{user_mutation(it->second)};
    // A rotated token means the old one may be in the wrong hands: its sessions go too.
    auto ended = end_sessions_of(name, &batch);
    commit(
        std::move(batch),
        [this, before, ended] {
          by_hash_.erase(users_[before.name].token_hash);
          users_[before.name] = before;
          index_user(before);
          restore_sessions(ended);
        },
        [done, token](const Status& s) {
          if (!s) return done(s.error());
          done(token);
        });
  });
}

void AccessControl::update_user(const std::string& name, const UserUpdate& update, const Done<UserRecord>& done) {
  in_turn<UserRecord>(kUsersTurn, done, [this, name, update](const Done<UserRecord>& done) {
    auto it = users_.find(name);
    if (it == users_.end()) return done(not_found("no user '" + name + "'; see `ag user list`"));
    UserRecord after = it->second;
    if (update.disabled) after.disabled = *update.disabled;
    if (update.role) after.role = *update.role;
    for (const auto& group : update.add_groups) {
      if (Status s = check_account_name("group name", group); !s) return done(s.error());
      if (std::find(after.groups.begin(), after.groups.end(), group) == after.groups.end())
        after.groups.push_back(group);
    }
    for (const auto& group : update.remove_groups) {
      auto held = std::find(after.groups.begin(), after.groups.end(), group);
      if (held == after.groups.end()) {
        return done(invalid_argument("user '" + name + "' is not in group '" + group + "' (nothing was changed)"));
      }
      after.groups.erase(held);
    }
    const UserRecord before = it->second;
    const bool was_admin = before.role == Role::kAdmin && !before.disabled;
    const bool is_admin = after.role == Role::kAdmin && !after.disabled;
    if (was_admin && !is_admin && enabled_admins() <= 1) {
      return done(Error{ErrorCode::kConflict, "user '" + name +
                                                  "' is the last enabled admin; add another admin first "
                                                  "(`ag user add NAME --role admin`)"});
    }
    it->second = after;
    std::vector<store::Mutation> batch{user_mutation(after)};
    std::vector<std::pair<std::string, Session>> ended;
    if (after.disabled && !before.disabled) ended = end_sessions_of(name, &batch);
    commit(
        std::move(batch),
        [this, before, ended] {
          users_[before.name] = before;
          restore_sessions(ended);
        },
        [done, after](const Status& s) {
          if (!s) return done(s.error());
          done(after);
        });
  });
}

void AccessControl::delete_user(const std::string& name, const Done<bool>& done) {
  in_turn<bool>(kUsersTurn, done, [this, name](const Done<bool>& done) {
    auto it = users_.find(name);
    if (it == users_.end()) return done(not_found("no user '" + name + "'; see `ag user list`"));
    const UserRecord before = it->second;
    if (before.role == Role::kAdmin && !before.disabled && enabled_admins() <= 1) {
      return done(
          Error{ErrorCode::kConflict, "user '" + name +
                                          "' is the last enabled admin and cannot be deleted; add another admin "
                                          "first (`ag user add NAME --role admin`)"});
    }
    std::vector<store::Mutation> batch{{kUsersTable, name, std::nullopt}};
    auto ended = end_sessions_of(name, &batch);
    by_hash_.erase(before.token_hash);
    users_.erase(it);
    commit(
        std::move(batch),
        [this, before, ended] {
          users_[before.name] = before;
          index_user(before);
          restore_sessions(ended);
        },
        [done](const Status& s) {
          if (!s) return done(s.error());
          done(true);
        });
  });
}

std::vector<UserRecord> AccessControl::users() const {
  std::vector<UserRecord> out;
  for (const auto& [_, user] : users_) out.push_back(user);
  return out;
}

const UserRecord* AccessControl::find_user(const std::string& name) const {
  auto it = users_.find(name);
  return it == users_.end() ? nullptr : &it->second;
}

std::vector<std::string> groups_of(const AccessControl& access, const std::string& name) {
  const UserRecord* user = access.find_user(name);
  return user ? user->groups : std::vector<std::string>{};
}

void AccessControl::create_join_token(int64_t ttl_ms, const std::string& created_by, const Done<NewJoinToken>& done) {
  if (ttl_ms < 0) return done(invalid_argument("a join token's time to live must not be negative"));
  int64_t now = deps_.clock.now_ms();
  NewJoinToken made{{"join_" + random_hex(4), "", now, ttl_ms == 0 ? 0 : now + ttl_ms, created_by}, new_token("agj_")};
  made.record.token_hash = hash_token(made.token);
  by_hash_[made.record.token_hash] = {Kind::kJoin, made.record.id};
  join_tokens_[made.record.id] = made.record;
  std::string id = made.record.id, hash = made.record.token_hash;
  commit({{kJoinTokensTable, id, join_to_json(made.record).dump()}},
         [this, id, hash] {
           join_tokens_.erase(id);
           by_hash_.erase(hash);
         },
         [done, made](const Status& s) {
           if (!s) return done(s.error());
           done(made);
         });
}

void AccessControl::revoke_join_token(const std::string& id, const Done<bool>& done) {
  in_turn<bool>("join:" + id, done, [this, id](const Done<bool>& done) {
    auto it = join_tokens_.find(id);
    if (it == join_tokens_.end()) return done(not_found("no join token '" + id + "'; see `ag token list`"));
    JoinTokenRecord before = it->second;
    by_hash_.erase(before.token_hash);
    join_tokens_.erase(it);
    commit(
        {{kJoinTokensTable, id, std::nullopt}},
        [this, before] {
          by_hash_[before.token_hash] = {Kind::kJoin, before.id};
          join_tokens_[before.id] = before;
        },
        [done](const Status& s) {
          if (!s) return done(s.error());
          done(true);
        });
  });
}

std::vector<JoinTokenRecord> AccessControl::join_tokens() const {
  std::vector<JoinTokenRecord> out;
  for (const auto& [_, t] : join_tokens_) out.push_back(t);
  return out;
}

void AccessControl::issue_node_credential(const std::string& node_id, const Done<std::string>& done) {
  in_turn<std::string>("node:" + node_id, done, [this, node_id](const Done<std::string>& done) {
    std::optional<NodeCredentialRecord> before;
    if (auto it = node_credentials_.find(node_id); it != node_credentials_.end()) {
      before = it->second;
      by_hash_.erase(it->second.token_hash);
    }
    std::string token = new_token("agn_");
    NodeCredentialRecord record{node_id, hash_token(token), deps_.clock.now_ms()};
    by_hash_[record.token_hash] = {Kind::kNode, node_id};
    node_credentials_[node_id] = record;
    json doc{{"node_id", node_id}, {"token_hash", record.token_hash}, {"issued_ms", record.issued_ms}};
    commit(
        {{kNodeCredentialsTable, node_id, doc.dump()}},
        [this, node_id, hash = record.token_hash, before] {
          by_hash_.erase(hash);
          node_credentials_.erase(node_id);
          if (before) {
            by_hash_[before->token_hash] = {Kind::kNode, node_id};
            node_credentials_[node_id] = *before;
          }
        },
        [done, token](const Status& s) {
          if (!s) return done(s.error());
          done(token);
        });
  });
}

void AccessControl::revoke_node_credential(const std::string& node_id, const Done<bool>& done) {
  in_turn<bool>("node:" + node_id, done, [this, node_id](const Done<bool>& done) {
    auto it = node_credentials_.find(node_id);
    if (it == node_credentials_.end()) return done(false);
    NodeCredentialRecord before = it->second;
    by_hash_.erase(before.token_hash);
    node_credentials_.erase(it);
    commit(
        {{kNodeCredentialsTable, node_id, std::nullopt}},
        [this, before] {
          by_hash_[before.token_hash] = {Kind::kNode, before.node_id};
          node_credentials_[before.node_id] = before;
        },
        [done](const Status& s) {
          if (!s) return done(s.error());
          done(true);
        });
  });
}

void AccessControl::create_session(const std::string& user, int64_t lifetime_ms, const Done<std::string>& done) {
  in_turn<std::string>("sessions:" + user, done, [this, user, lifetime_ms](const Done<std::string>& done) {
    int64_t now = deps_.clock.now_ms();
    std::vector<store::Mutation> batch;
    // Ended sessions are dropped here; a user at the limit loses the oldest.
    std::string oldest;
    int64_t oldest_expiry = INT64_MAX;
    size_t held = 0;
    for (auto it = sessions_.begin(); it != sessions_.end();) {
      if (it->second.expires_ms <= now) {
        batch.push_back({kSessionsTable, it->first, std::nullopt});
        it = sessions_.erase(it);
        continue;
      }
      if (it->second.user == user) {
        ++held;
        if (it->second.expires_ms < oldest_expiry) {
          oldest_expiry = it->second.expires_ms;
          oldest = it->first;
        }
      }
      ++it;
    }
    if (held >= kMaxSessionsPerUser) {
      sessions_.erase(oldest);
      batch.push_back({kSessionsTable, oldest, std::nullopt});
    }
    std::string session = new_token("ags_");
    std::string hash = hash_token(session);
    sessions_[hash] = {user, now + lifetime_ms};
    batch.push_back({kSessionsTable, hash, json{{"user", user}, {"expires_ms", now + lifetime_ms}}.dump()});
    commit(
        std::move(batch), [this, hash] { sessions_.erase(hash); },
        [done, session](const Status& s) {
          if (!s) return done(s.error());
          done(session);
        });
  });
}

void AccessControl::end_session(const std::string& session_hash, const Done<bool>& done) {
  // A user's sessions take turns (creating one also ends their oldest).
  auto held = sessions_.find(session_hash);
  if (held == sessions_.end()) return done(false);
  in_turn<bool>("sessions:" + held->second.user, done, [this, session_hash](const Done<bool>& done) {
    auto it = sessions_.find(session_hash);
    if (it == sessions_.end()) return done(false);
    Session before = it->second;
    sessions_.erase(it);
    commit(
        {{kSessionsTable, session_hash, std::nullopt}},
        [this, session_hash, before] { sessions_[session_hash] = before; },
        [done](const Status& s) {
          if (!s) return done(s.error());
          done(true);
        });
  });
}

}  // namespace ag::head
