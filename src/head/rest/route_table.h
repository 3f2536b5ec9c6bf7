// RouteTable: the REST API's routes, method + path pattern -> handler and who may call
// it. A pattern is a path of segments, each literal ("jobs") or a parameter ("{job}",
// one non-empty segment). A path is matched against every pattern of as many segments;
// of several matches the most specific wins, segment by segment from the left (a
// literal before a parameter), so "/api/jobs/batch" beats "/api/jobs/{job}" whatever
// the order routes were added in. A path some pattern matches, but not for this method,
// is a 405 with the methods it takes; one no pattern matches is a 404.
//
// The table only matches; ApiRoutes (api_routes.h) checks the route's Access before it
// calls the handler. Built once at start, read on the io thread.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "head/auth/access_control.h"
#include "net/http_types.h"

namespace ag::head {

// Who may call a route (access_control.h has the policy; `what` in the route names the
// action in the 403).
enum class Access {
  kUser,          // any user, viewers too: reads
  kSubmitter,     // users and admins, not viewers: "user X is a viewer: viewers cannot <what>"
  kAdmin,         // admins: "<what>: only an admin can do this; ..."
  kSelfOrAdmin,   // the user named by {name}, or an admin
  kJobOwner,      // the job's owner, their groups' members, admins: checked on the job {job}
  kPackageReader, // users but not viewers, and nodes (they fetch jobs' code)
};
const char* to_string(Access access);

// A request as a handler gets it: who sent it and the pattern's parameters.
struct Call {
  const net::HttpRequest& req;
  const Principal& who;
  std::map<std::string, std::string> params;  // {name} -> its segment
  const std::string& param(const std::string& name) const;
};
using Handler = std::function<void(const Call& call, net::Respond respond)>;

struct Route {
  std::string method;
  std::string pattern;
  Access access = Access::kUser;
  std::string what;  // the action, for refusals ("submit jobs", "stop it", ...)
  Handler handler;
};

class RouteTable {
 public:
  // Adds a route. A second route with the same method and pattern is a programming
  // error: it throws std::logic_error at start.
  void add(Route route);

  struct Match {
    enum class Kind { kFound, kNoRoute, kMethodNotAllowed };
    Kind kind = Kind::kNoRoute;
    const Route* route = nullptr;
    std::map<std::string, std::string> params;
    std::vector<std::string> allowed;  // kMethodNotAllowed: the methods the path takes
  };
  Match find(const std::string& method, std::string_view path) const;

  const std::vector<Route>& routes() const { return routes_; }

 private:
  struct Compiled {
    std::vector<std::string> segments;  // "{name}" for a parameter
  };
  std::vector<Route> routes_;
  std::vector<Compiled> compiled_;  // one per route, same index
};

}  // namespace ag::head
