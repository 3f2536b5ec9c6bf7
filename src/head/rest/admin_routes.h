// AdminRoutes: users, join tokens and the audit log, once ApiRoutes has matched the
// route and checked the caller's access (admins; a user may rotate their own token).
//
//   GET|POST /api/users                    list / add {"name", "role", "groups"} -> the token
//   GET      /api/users/{name}
//   PATCH    /api/users/{name}              {"role", "add_groups": [...], "remove_groups": [...]}
//   DELETE   /api/users/{name}              their token and sessions end; jobs keep their name
//   POST     /api/users/{name}/rotate      a new token (the old one stops working)
//   POST     /api/users/{name}/disable|enable
//   GET|POST /api/tokens                   join tokens: list / make {"kind": "join", "ttl_s"}
//   DELETE   /api/tokens/{token}           revoke a join token
//   GET      /api/audit?limit=N[&actor=U&action=TEXT&since_ms=T]   who changed what,
//                                          newest first; only one user's, actions
//                                          containing TEXT, since T
// Io thread only.
#pragma once

#include "head/rest/rest_deps.h"
#include "head/rest/route_table.h"

namespace ag::head {

class AdminRoutes {
 public:
  explicit AdminRoutes(const RestDeps& deps) : deps_(deps) {}

  void list_users(const Call& call, net::Respond respond);
  void add_user(const Call& call, net::Respond respond);
  void show_user(const Call& call, net::Respond respond);
  void rotate_user(const Call& call, net::Respond respond);
  void set_user_disabled(const Call& call, net::Respond respond);  // disable or enable, as the path says
  void change_user(const Call& call, net::Respond respond);
  void delete_user(const Call& call, net::Respond respond);
  void list_tokens(const Call& call, net::Respond respond);
  void create_token(const Call& call, net::Respond respond);
  void revoke_token(const Call& call, net::Respond respond);
  void audit(const Call& call, net::Respond respond);

 private:
  RestDeps deps_;
};

}  // namespace ag::head
