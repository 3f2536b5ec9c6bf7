// AccessControl: who is calling, and what each credential may do.
//
// Four kinds of credential, each a random token of which the head keeps only the
// SHA-256 (in its store, tables below), so a copy of head.db logs nobody in:
//
//   user token   "agu_…"  a person or script: role admin, user or viewer (policy below)
//   join token   "agj_…"  may only register a worker node; expires or is revoked
//   node token   "agn_…"  given to a node when it registers; bound to that node id; may
//                         only speak the worker protocol and fetch packages
//   session      "ags_…"  the dashboard's cookie after a user signs in; ends at sign-out
//
// The token made at the head's first start belongs to the first admin, "admin"; a
// join token is made with it (bootstrap()). Changes are applied at once (a revoked
// credential stops working on the next request) and are durable before `done` runs;
// a change the store could not write is undone. Changes to one thing take turns (every
// user change with every other, a node's credential, a join token, a user's sessions):
// each is worked out and applied once the one before it is stored or undone, so an
// undo never takes back a later change with it. Io thread only (the store's answers
// come back through Timers::post).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "common/timers.h"
#include "common/turns.h"
#include "head/store/kv_store.h"

namespace ag::head {

enum class Role { kAdmin, kUser, kViewer };
std::string to_string(Role role);
std::optional<Role> parse_role(std::string_view text);

struct UserRecord {
  std::string name;
  Role role = Role::kUser;
  std::vector<std::string> groups;
  std::string token_hash;
  bool disabled = false;
  int64_t created_ms = 0;
  int64_t token_issued_ms = 0;
  std::string created_by;
};

struct JoinTokenRecord {
  std::string id;  // "join_" + 8 hex: what lists show and `ag token revoke` takes
  std::string token_hash;
  int64_t created_ms = 0;
  int64_t expires_ms = 0;  // 0: until revoked
  std::string created_by;
};

struct NodeCredentialRecord {
  std::string node_id;
  std::string token_hash;
  int64_t issued_ms = 0;
};

// Who sent a request, as far as the head could tell.
struct Principal {
  enum class Kind { kNone, kUser, kJoin, kNode };
  Kind kind = Kind::kNone;
  std::string name;  // user name, join token id, or node id
  Role role = Role::kViewer;
  std::vector<std::string> groups;
  std::string session_hash;  // set when a dashboard session cookie authenticated it
  // Why authentication failed (kind kNone), for the 401: "expired join token", ...
  std::string refusal;

  bool is_user() const { return kind == Kind::kUser; }
  bool is_admin() const { return kind == Kind::kUser && role == Role::kAdmin; }
  bool via_cookie() const { return !session_hash.empty(); }
};

// The authorization policy, pure.
//   admin:  everything.
//   user:   submit; read every job's status; stop a job and read its logs and env
//           vars only when it is theirs or its owner shares a group with them.
//   viewer: read-only: cluster, nodes, job status; no logs or env vars of anyone's job.
// Join and node credentials get nothing from these.
bool may_submit(const Principal& who);
bool may_read_status(const Principal& who);
// `owner_groups`: the groups of the job's owner now.
bool may_act_on_job(const Principal& who, const std::string& owner, const std::vector<std::string>& owner_groups);

class AccessControl;
// The groups of user `name` (none for an unknown user).
std::vector<std::string> groups_of(const AccessControl& access, const std::string& name);

// A user name or group name: [a-z][a-z0-9_-]{0,31}. Errors: kInvalidArgument saying so.
Status check_account_name(const std::string& what, const std::string& name);

class AccessControl {
 public:
  struct Deps {
    store::KvStore& store;
    Timers& timers;
    const Clock& clock;
  };
  explicit AccessControl(Deps deps) : deps_(deps) {}

  // Loads every credential from the store (at start). Errors: kInternal.
  Status recover();

  // At the head's first start (no user yet), `admin_token` becomes the token of user
  // "admin" (role admin); later starts leave users alone. `new_join_token`, when
  // given, becomes a join token that does not expire (the one `ag start-head` prints,
  // made again when the old one was revoked). Waits until durable; call before serving.
  Status bootstrap(const std::string& admin_token, const std::optional<std::string>& new_join_token);

  // A bearer token's owner (kNone with `refusal` when unknown, disabled, expired).
  Principal authenticate_token(std::string_view token) const;
  // A dashboard session cookie's value; kNone unless the session is live and its
  // user enabled.
  Principal authenticate_session(std::string_view session) const;

  template <typename T>
  using Done = std::function<void(Result<T>)>;

  // Users. Errors: kInvalidArgument (bad name/group, a group to remove they are not
  // in), kConflict (the name is taken; the last enabled admin cannot be disabled,
  // demoted or deleted), kNotFound, the store's error. A disabled or deleted user's
  // sessions end at once, as do a rotated token's.
  void add_user(UserRecord user, const Done<std::string>& done);  // -> the new token
  void rotate_user(const std::string& name, const Done<std::string>& done);  // -> the new token
  struct UserUpdate {
    std::optional<bool> disabled;
    std::optional<Role> role;
    std::vector<std::string> add_groups;
    std::vector<std::string> remove_groups;
  };
  void update_user(const std::string& name, const UserUpdate& update, const Done<UserRecord>& done);  // -> as now
  // Their token and sessions stop working; their jobs keep their name as owner.
  void delete_user(const std::string& name, const Done<bool>& done);
  std::vector<UserRecord> users() const;
  const UserRecord* find_user(const std::string& name) const;

  // Join tokens. `ttl_ms` 0: until revoked.
  struct NewJoinToken {
    JoinTokenRecord record;
    std::string token;
  };
  void create_join_token(int64_t ttl_ms, const std::string& created_by, const Done<NewJoinToken>& done);
  void revoke_join_token(const std::string& id, const Done<bool>& done);
  std::vector<JoinTokenRecord> join_tokens() const;

  // Node credentials: a new one replaces the node's old one.
  void issue_node_credential(const std::string& node_id, const Done<std::string>& done);
  void revoke_node_credential(const std::string& node_id, const Done<bool>& done);
  bool has_node_credential(const std::string& node_id) const { return node_credentials_.count(node_id) > 0; }

  // Dashboard sessions of `user`, lasting `lifetime_ms`. -> the cookie value.
  void create_session(const std::string& user, int64_t lifetime_ms, const Done<std::string>& done);
  void end_session(const std::string& session_hash, const Done<bool>& done);

  // A name for the session cookie, unique to this head (cookies are shared across
  // ports on one host).
  const std::string& cookie_name() const { return cookie_name_; }

 private:
  struct Session {
    std::string user;
    int64_t expires_ms = 0;
  };
  enum class Kind { kUser, kJoin, kNode };
  struct IndexEntry {
    Kind kind;
    std::string name;
  };

  // Runs `change` once every change under `key` asked before it has ended; `change` is
  // given the `done` to answer with, which also ends its turn.
  template <typename T>
  void in_turn(const std::string& key, const Done<T>& done, std::function<void(const Done<T>&)> change);
  // Writes `batch`; on failure runs `undo`. `done` runs on the io thread either way.
  void commit(std::vector<store::Mutation> batch, std::function<void()> undo, std::function<void(Status)> done);
  void index_user(const UserRecord& user);
  store::Mutation user_mutation(const UserRecord& user) const;
  // Ends `user`'s sessions (their deletions go into `batch`); -> those ended, for an undo.
  std::vector<std::pair<std::string, Session>> end_sessions_of(const std::string& user,
                                                               std::vector<store::Mutation>* batch);
  void restore_sessions(const std::vector<std::pair<std::string, Session>>& ended);
  int enabled_admins() const;

  Deps deps_;
  std::map<std::string, UserRecord> users_;
  std::map<std::string, JoinTokenRecord> join_tokens_;
  std::map<std::string, NodeCredentialRecord> node_credentials_;
  std::unordered_map<std::string, Session> sessions_;  // by hash
  std::unordered_map<std::string, IndexEntry> by_hash_;  // token hash -> owner
  std::string cookie_name_ = "ag_session";
  Turns turns_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);

 public:
  ~AccessControl() { *alive_ = false; }
  AccessControl(const AccessControl&) = delete;
  AccessControl& operator=(const AccessControl&) = delete;
};

}  // namespace ag::head
