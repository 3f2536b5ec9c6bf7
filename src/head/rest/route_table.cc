#include "head/rest/route_table.h"

#include <stdexcept>

namespace ag::head {
namespace {

std::vector<std::string> split(std::string_view path) {
  std::vector<std::string> segments;
  if (path.empty() || path.front() != '/') return segments;
  size_t start = 1;
  while (true) {
    const size_t slash = path.find('/', start);
    segments.emplace_back(path.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start));
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return segments;
}

bool is_param(const std::string& segment) {
  return segment.size() > 2 && segment.front() == '{' && segment.back() == '}';
}

// Matches `path` against a pattern: the parameters, and for each segment whether it was
// a literal (for specificity). False when it does not match.
bool match(const std::vector<std::string>& pattern, const std::vector<std::string>& path,
           std::map<std::string, std::string>* params, std::vector<bool>* literal) {
  if (pattern.size() != path.size()) return false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (is_param(pattern[i])) {
      if (path[i].empty()) return false;
      (*params)[pattern[i].substr(1, pattern[i].size() - 2)] = path[i];
      literal->push_back(false);
    } else if (pattern[i] == path[i]) {
      literal->push_back(true);
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace

const char* to_string(Access access) {
  switch (access) {
    case Access::kUser: return "user";
    case Access::kSubmitter: return "submitter";
    case Access::kAdmin: return "admin";
    case Access::kSelfOrAdmin: return "self-or-admin";
    case Access::kJobOwner: return "job-owner";
    case Access::kPackageReader: return "package-reader";
  }
  return "?";
}

const std::string& Call::param(const std::string& name) const {
  static const std::string kNone;
  auto it = params.find(name);
  return it == params.end() ? kNone : it->second;
}

void RouteTable::add(Route route) {
  // Parameters' names do not tell two patterns apart: "/a/{x}" and "/a/{y}" are one.
  const auto shape = [](std::vector<std::string> segments) {
    for (auto& segment : segments) {
      if (is_param(segment)) segment = "{}";
    }
    return segments;
  };
  std::vector<std::string> segments = split(route.pattern);
  for (size_t i = 0; i < routes_.size(); ++i) {
    if (routes_[i].method == route.method && shape(compiled_[i].segments) == shape(segments)) {
      throw std::logic_error("route " + route.method + " " + route.pattern + " is in the table already (as " +
                             routes_[i].pattern + ")");
    }
  }
  compiled_.push_back({std::move(segments)});
  routes_.push_back(std::move(route));
}

RouteTable::Match RouteTable::find(const std::string& method, std::string_view path) const {
  const std::vector<std::string> segments = split(path);
  Match best;
  std::vector<bool> shape_literal;  // the most specific shape any method matched
  for (size_t i = 0; i < routes_.size(); ++i) {
    std::map<std::string, std::string> params;
    std::vector<bool> literal;
    if (!match(compiled_[i].segments, segments, &params, &literal)) continue;
    // The most specific pattern decides; a less specific one that takes the method does
    // not stand in for it (GET /api/jobs/batch is a 405, not a job named "batch").
    if (shape_literal.empty() || literal > shape_literal) {
      shape_literal = literal;
      best = Match{};
    } else if (literal < shape_literal) {
      continue;
    }
    if (routes_[i].method == method) {
      best.kind = Match::Kind::kFound;
      best.route = &routes_[i];
      best.params = std::move(params);
    } else {
      best.allowed.push_back(routes_[i].method);
    }
  }
  if (best.kind != Match::Kind::kFound && !best.allowed.empty()) best.kind = Match::Kind::kMethodNotAllowed;
  return best;
}

}  // namespace ag::head
