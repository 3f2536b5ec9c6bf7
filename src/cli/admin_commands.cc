// ag user, ag token, ag remove-node, ag audit, ag whoami: who may use the cluster.
#include <charconv>
#include <cmath>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <iostream>
#include <optional>
#include <map>
#include <thread>

#include "cli/api_client.h"
#include "cli/commands.h"
#include "cli/units.h"
#include "cli/table.h"
#include "cli/time_args.h"
#include "common/amounts.h"
#include "common/private_dir.h"
#include "net/auth.h"
#include "net/http_client.h"
#include "net/http_types.h"
#include "net/tls.h"

namespace ag::cli {
namespace {

using nlohmann::json;

bool json_output(const ConnectionOptions& conn) { return conn.output == "json"; }

std::string join(const json& list) {
  std::string out;
  for (const auto& item : list) out += (out.empty() ? "" : ",") + item.get<std::string>();
  return out.empty() ? "-" : out;
}

// Calls the head and prints the answer as JSON with -o json; returns the body or the
// exit code to return.
Result<json> call(const ConnectionOptions& options, const std::string& method, const std::string& target,
                  const json& body = nullptr) {
  auto conn = resolve_connection(options);
  if (!conn.ok()) return conn.error();
  return call_json(conn.value(), method, target, body.is_null() ? "" : body.dump());
}

// GET `target` for a table: nullopt once it was printed as JSON (-o json) or failed
// (the error printed), with `rc` the exit code then.
std::optional<json> fetch_for_table(const ConnectionOptions& options, const std::string& target, int& rc) {
  auto res = call(options, "GET", target);
  rc = res.ok() ? 0 : fail(res.error());
  if (!res.ok()) return std::nullopt;
  if (json_output(options)) {
    std::cout << res.value().dump(2) << "\n";
    return std::nullopt;
  }
  return std::move(res.value());
}

int print_or_fail(const ConnectionOptions& options, const Result<json>& res, const std::string& text) {
  if (!res.ok()) return fail(res.error());
  if (json_output(options)) {
    std::cout << res.value().dump(2) << "\n";
  } else {
    std::cout << text << "\n";
  }
  return 0;
}

}  // namespace

Result<int64_t> parse_lifetime_s(const std::string& flag, const std::string& text) {
  auto seconds = parse_duration_s(flag, text);
  if (!seconds.ok()) return seconds.error();
  if (seconds.value() > 3650.0 * 86400) {
    return invalid_argument(flag + ": " + text + " is too long: give at most 3650d (or 0 for no end)");
  }
  if (seconds.value() != 0 && seconds.value() < 1) {
    return invalid_argument(flag + ": " + text + " is too short: give 1s or more (or 0 for no end)");
  }
  return static_cast<int64_t>(std::llround(seconds.value()));
}

int user_add(const ConnectionOptions& options, const std::string& name, const std::string& role,
             const std::vector<std::string>& groups) {
  json body{{"name", name}, {"role", role}, {"groups", groups}};
  auto res = call(options, "POST", "/api/users", body);
  if (!res.ok()) return fail(res.error());
  if (json_output(options)) {
    std::cout << res.value().dump(2) << "\n";
    return 0;
  }
  std::cout << "User " << name << " (" << role << ") added. Their token, shown only this once:\n\n  "
            << res.value()["token"].get<std::string>() << "\n\n"
            << "Hand it over privately; they keep it in a file only they can read and use it with\n"
            << "  (umask 077; cat > ~/.aethergrid-token)   # paste, then Ctrl-D\n"
            << "  ag --token-file ~/.aethergrid-token list-jobs     (or export AG_TOKEN_FILE=~/.aethergrid-token)\n";
  return 0;
}

int user_list(const ConnectionOptions& options) {
  int rc = 0;
  auto res = fetch_for_table(options, "/api/users", rc);
  if (!res) return rc;
  Table table({"USER", "ROLE", "GROUPS", "STATE", "CREATED", "TOKEN ISSUED", "CREATED BY"});
  for (const auto& u : res.value()["users"]) {
    table.add({u["name"].get<std::string>(), u["role"].get<std::string>(), join(u["groups"]),
               u["disabled"].get<bool>() ? "disabled" : "enabled", format_time_ms(u["created_ms"].get<int64_t>()),
               format_time_ms(u["token_issued_ms"].get<int64_t>()), u["created_by"].get<std::string>()});
  }
  table.print(std::cout);
  return 0;
}

int user_set_enabled(const ConnectionOptions& options, const std::string& name, bool enabled) {
  auto res = call(options, "POST", "/api/users/" + net::url_encode(name) + (enabled ? "/enable" : "/disable"));
  return print_or_fail(options, res,
                       "User " + name + (enabled ? " enabled." : " disabled: their token and dashboard sessions no "
                                                                 "longer work."));
}

int user_set(const ConnectionOptions& options, const std::string& name, const std::string& role,
             const std::vector<std::string>& add_groups, const std::vector<std::string>& remove_groups) {
  json body = json::object();
  if (!role.empty()) body["role"] = role;
  if (!add_groups.empty()) body["add_groups"] = add_groups;
  if (!remove_groups.empty()) body["remove_groups"] = remove_groups;
  if (body.empty()) return usage_error("say what to change: --role ROLE, --group GROUP or --remove-group GROUP");
  auto res = call(options, "PATCH", "/api/users/" + net::url_encode(name), body);
  if (!res.ok()) return fail(res.error());
  if (json_output(options)) {
    std::cout << res.value().dump(2) << "\n";
    return 0;
  }
  std::string groups;
  for (const auto& g : res.value()["groups"]) groups += (groups.empty() ? "" : ", ") + g.get<std::string>();
  std::cout << "User " << name << " is now " << res.value()["role"].get<std::string>()
            << (groups.empty() ? ", in no group" : ", in groups " + groups) << "\n";
  return 0;
}

int user_delete(const ConnectionOptions& options, const std::string& name) {
  auto res = call(options, "DELETE", "/api/users/" + net::url_encode(name));
  return print_or_fail(options, res,
                       "User " + name + " deleted: their token and dashboard sessions no longer work; their jobs keep " +
                           name + " as owner.");
}

int user_rotate(const ConnectionOptions& options, const std::string& name) {
  auto res = call(options, "POST", "/api/users/" + net::url_encode(name) + "/rotate");
  if (!res.ok()) return fail(res.error());
  if (json_output(options)) {
    std::cout << res.value().dump(2) << "\n";
    return 0;
  }
  std::cout << "New token for " << name << " (the old one and its dashboard sessions no longer work), shown only "
            << "this once:\n\n  " << res.value()["token"].get<std::string>() << "\n";
  return 0;
}

int token_create_join(const ConnectionOptions& options, const std::string& ttl) {
  auto ttl_s = parse_lifetime_s("--ttl", ttl);
  if (!ttl_s.ok()) return usage_error(ttl_s.error().message);
  auto res = call(options, "POST", "/api/tokens", json{{"kind", "join"}, {"ttl_s", ttl_s.value()}});
  if (!res.ok()) return fail(res.error());
  if (json_output(options)) {
    std::cout << res.value().dump(2) << "\n";
    return 0;
  }
  const json& t = res.value();
  int64_t expires = t["expires_ms"].get<int64_t>();
  std::cout << "Join token " << t["id"].get<std::string>() << " ("
            << (expires ? "expires " + format_time_ms(expires) : std::string("does not expire")) << "; revoke with "
            << "`ag token revoke " << t["id"].get<std::string>() << "`). It can only add nodes:\n\n"
            << "  (umask 077; echo " << t["token"].get<std::string>() << " > ~/.aethergrid-join-token)\n"
            << "  ag start-worker --head-node HEAD:PORT --token-file ~/.aethergrid-join-token\n";
  return 0;
}

int token_list(const ConnectionOptions& options) {
  int rc = 0;
  auto res = fetch_for_table(options, "/api/tokens", rc);
  if (!res) return rc;
  Table table({"ID", "KIND", "CREATED", "EXPIRES", "CREATED BY"});
  for (const auto& t : res.value()["tokens"]) {
    int64_t expires = t["expires_ms"].get<int64_t>();
    table.add({t["id"].get<std::string>(), t["kind"].get<std::string>(), format_time_ms(t["created_ms"].get<int64_t>()),
               expires == 0 ? "never" : format_time_ms(expires) + (t["expired"].get<bool>() ? " (expired)" : ""),
               t["created_by"].get<std::string>()});
  }
  table.print(std::cout);
  return 0;
}

int token_revoke(const ConnectionOptions& options, const std::string& id) {
  auto res = call(options, "DELETE", "/api/tokens/" + net::url_encode(id));
  return print_or_fail(options, res, "Join token " + id + " revoked: it can no longer add nodes.");
}

int remove_node(const ConnectionOptions& options, const std::string& node_id) {
  auto res = call(options, "DELETE", "/api/nodes/" + net::url_encode(node_id));
  return print_or_fail(options, res,
                       "Node " + node_id + " removed: its credential is revoked, its worker disconnected, and its "
                       "tasks are lost (jobs with retries left run again elsewhere).");
}

int set_draining(const ConnectionOptions& options, const std::string& node_id, bool draining) {
  auto res = call(options, "POST", "/api/nodes/" + net::url_encode(node_id) + (draining ? "/drain" : "/resume"));
  return print_or_fail(options, res,
                       draining ? "Node " + node_id + " is draining: it takes no new tasks, and those running finish. "
                                  "`ag resume " + node_id + "` gives it work again."
                                : "Node " + node_id + " takes new tasks again.");
}

int audit(const ConnectionOptions& options, const AuditOptions& asked) {
  std::string target = "/api/audit?limit=" + std::to_string(asked.limit);
  if (!asked.user.empty()) target += "&actor=" + net::url_encode(asked.user);
  if (!asked.action.empty()) target += "&action=" + net::url_encode(asked.action);
  if (!asked.since.empty()) {
    const auto now_ms = static_cast<int64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                 std::chrono::system_clock::now().time_since_epoch())
                                                 .count());
    auto since_ms = parse_since(asked.since, now_ms);
    if (!since_ms.ok()) return usage_error(since_ms.error().message);
    if (since_ms.value() > now_ms) {
      return usage_error("--since " + asked.since + " is in the future: give a time ago (1d) or a UTC time already "
                                                    "past");
    }
    target += "&since_ms=" + std::to_string(since_ms.value());
  }
  auto res = call(options, "GET", target);
  if (!res.ok()) return fail(res.error());
  if (json_output(options)) {
    std::cout << res.value().dump(2) << "\n";
    return 0;
  }
  Table table({"TIME", "WHO", "FROM", "ACTION", "OUTCOME"});
  for (const auto& e : res.value()["entries"]) {
    std::string actor = e["actor"].get<std::string>();
    table.add({format_time_ms(e["time_ms"].get<int64_t>()), actor.empty() ? "-" : actor, e["from"].get<std::string>(),
               e["action"].get<std::string>(), e["outcome"].get<std::string>()});
  }
  table.print(std::cout);
  return 0;
}

int tls_ca_cert(const ConnectionOptions& options) {
  std::string address = options.address;
  if (address.empty()) {
    if (const char* env = std::getenv("AG_ADDRESS"); env && *env) address = env;
  }
  if (address.empty()) {
    if (auto session = read_session()) address = session->address;
  }
  if (address.empty()) address = read_user_config().address;
  if (address.empty()) return usage_error("which head? give --address HOST:PORT (or run this on the head's machine)");
  auto heads = net::parse_endpoints(address, 6379);
  if (!heads.ok()) return usage_error("--address: " + heads.error().message);
  auto endpoint = Result<net::Endpoint>(heads->front());
  const std::string file = known_ca_file(endpoint.value());
  if (file.empty()) {
    return fail(Error{ErrorCode::kNotFound,
                      "no cluster CA is known here for " + endpoint->to_string() + ": pin it first with `ag config "
                      "--address " + endpoint->to_string() + " --ca-fingerprint sha256:...` (the line `ag start-head` "
                      "printed), or run this on the head's machine"});
  }
  std::ifstream in(file);
  std::string pem((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto fingerprint = net::certificate_fingerprint(pem);
  if (!in || !fingerprint.ok()) {
    return fail(Error{ErrorCode::kInternal, "cannot read the cluster CA in " + file +
                                                (fingerprint.ok() ? "" : ": " + fingerprint.error().message)});
  }
  std::cout << pem;
  std::cerr << "The cluster CA of " << endpoint->to_string() << " (" << fingerprint.value()
            << "). Saved as a file (ag tls ca-cert > aethergrid-ca.crt), it is what a browser imports as an "
               "authority to trust the dashboard (README, Dashboard).\n";
  return 0;
}

int config(const ConnectionOptions& options, const std::string& ca_fingerprint) {
  UserConfig config = read_user_config();
  if (options.address.empty() && ca_fingerprint.empty()) {
    json out{{"file", user_config_path()}, {"address", config.address}, {"ca_files", config.ca_files}};
    if (json_output(options)) {
      std::cout << out.dump(2) << "\n";
      return 0;
    }
    std::cout << "Settings: " << user_config_path() << "\n  Default head: "
              << (config.address.empty() ? "(none)" : config.address) << "\n";
    for (const auto& [head, file] : config.ca_files) std::cout << "  " << head << ": cluster CA " << file << "\n";
    return 0;
  }
  if (options.address.empty()) {
    return usage_error("give the head's --address HOST:PORT with --ca-fingerprint");
  }
  auto heads = net::parse_endpoints(options.address, 6379);
  if (!heads.ok()) return usage_error("--address: " + heads.error().message);
  if (!ca_fingerprint.empty()) {
    // Every head of a cluster hands out the one cluster CA: the first that answers.
    auto ca = net::fetch_pinned_ca(heads->front(), ca_fingerprint, 10000);
    for (size_t i = 1; i < heads->size() && !ca.ok() && ca.error().code == ErrorCode::kUnavailable; ++i) {
      ca = net::fetch_pinned_ca((*heads)[i], ca_fingerprint, 10000);
    }
    if (!ca.ok()) {
      if (ca.error().code == ErrorCode::kInvalidArgument) return usage_error("--ca-fingerprint: " + ca.error().message);
      return fail(Error{ca.error().code, "--ca-fingerprint: " + ca.error().message});
    }
    std::string dir = std::filesystem::path(user_config_path()).parent_path().string();
    if (Status s = ensure_private_dir(dir); !s) return fail(s.error());
    for (const auto& head : heads.value()) {
      std::string file = dir + "/ca-" + head.host + "-" + std::to_string(head.port) + ".pem";
      if (Status s = net::write_token_file(file, ca.value()); !s) return fail(s.error());
      config.ca_files[head.to_string()] = file;
    }
  }
  config.address.clear();
  for (const auto& head : heads.value()) config.address += (config.address.empty() ? "" : ",") + head.to_string();
  if (Status s = write_user_config(config); !s) return fail(s.error());
  std::cout << "Default head: " << config.address
            << (ca_fingerprint.empty() ? "" : " (its cluster CA is pinned: every call verifies the head)") << "\n";
  return 0;
}

int whoami(const ConnectionOptions& options) {
  auto res = call(options, "GET", "/api/whoami");
  if (!res.ok()) return fail(res.error());
  const json& me = res.value();
  return print_or_fail(options, res,
                       me["name"].get<std::string>() + " (" + me["role"].get<std::string>() +
                           (me["groups"].empty() ? "" : "; groups " + join(me["groups"])) + ")");
}

int pull_image(const ConnectionOptions& options, const std::string& image, const std::vector<std::string>& nodes,
               double timeout_s) {
  json body = {{"image", image}};
  if (!nodes.empty()) {
    // --nodes a,b and --nodes a --nodes b alike.
    json ids = json::array();
    for (const auto& item : nodes) {
      for (size_t start = 0; start <= item.size();) {
        size_t comma = item.find(',', start);
        std::string id = item.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        if (!id.empty()) ids.push_back(id);
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
    }
    body["nodes"] = ids;
  }
  auto conn = resolve_connection(options);
  if (!conn.ok()) return fail(conn.error());
  auto state = call_json(conn.value(), "POST", "/api/images/pull", body.dump());
  if (!state.ok()) return fail(state.error());
  const std::string id = state.value()["pull_id"].get<std::string>();
  const bool quiet = json_output(options);
  if (!quiet) std::cout << "Pulling " << image << " on " << state.value()["nodes"].size() << " node(s)\n" << std::flush;
  std::map<std::string, std::string> shown;  // node -> the last line printed for it
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  for (;;) {
    for (const auto& n : state.value()["nodes"]) {
      std::string line = n["state"].get<std::string>() == "pulling" ? n["message"].get<std::string>()
                                                                      : n["state"].get<std::string>() + ": " +
                                                                            n["message"].get<std::string>();
      std::string& last = shown[n["node_id"].get<std::string>()];
      if (line != last && !quiet) {
        std::cout << n["node_id"].get<std::string>() << ": " << terminal_safe(line, false) << "\n" << std::flush;
      }
      last = line;
    }
    if (state.value()["finished"].get<bool>()) break;
    if (std::chrono::steady_clock::now() > deadline) {
      return fail(Error{ErrorCode::kUnavailable, "no end after " + std::to_string(static_cast<int>(timeout_s)) +
                                                     " s; the nodes go on pulling (see GET /api/images/pulls/" + id + ")"});
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    state = call_json(conn.value(), "GET", "/api/images/pulls/" + id);
    if (!state.ok()) return fail(state.error());
  }
  int failed = 0;
  for (const auto& n : state.value()["nodes"]) failed += n["state"].get<std::string>() == "failed";
  const size_t total = state.value()["nodes"].size();
  if (quiet) {
    std::cout << state.value().dump(2) << "\n";
  } else if (failed == 0) {
    std::cout << "Pulled " << image << " on " << total << " node(s)\n";
  } else {
    std::cerr << "error: " << failed << " of " << total << " node(s) could not pull " << image << " (see above)\n";
  }
  return failed == 0 ? 0 : 1;
}

// ---- quotas --------------------------------------------------------------------------

namespace {

// "user alice" and /api/quotas/users/alice (or a group's).
std::pair<std::string, std::string> quota_subject(const QuotaOptions& quota) {
  if (quota.user.empty()) return {"group " + quota.group, "/api/quotas/groups/" + net::url_encode(quota.group)};
  return {"user " + quota.user, "/api/quotas/users/" + net::url_encode(quota.user)};
}

}  // namespace

int quota_set(const ConnectionOptions& options, const QuotaOptions& quota) {
  if (quota.user.empty() == quota.group.empty()) return usage_error("give --user NAME or --group NAME (one of them)");
  json body = json::object();
  if (quota.max_gpus) body["max_gpus"] = *quota.max_gpus;
  if (quota.max_cpus) body["max_cpus"] = *quota.max_cpus;
  if (quota.max_memory_gb) body["max_memory"] = static_cast<int64_t>(*quota.max_memory_gb * (int64_t{1} << 30));
  if (quota.max_running_jobs) body["max_running_jobs"] = *quota.max_running_jobs;
  if (quota.max_priority) body["max_priority"] = *quota.max_priority;
  if (quota.allow_no_preempt) body["allow_no_preempt"] = true;
  if (quota.share) body["share"] = *quota.share;
  if (body.empty()) {
    return usage_error("give at least one of --max-gpus, --max-cpus, --max-memory, --max-running-jobs, "
                       "--max-priority, --allow-no-preempt, --share (`ag quota remove` removes a quota)");
  }
  const auto [who, target] = quota_subject(quota);
  return print_or_fail(options, call(options, "PUT", target, body), "Quota of " + who + " set.");
}

int quota_remove(const ConnectionOptions& options, const QuotaOptions& quota) {
  if (quota.user.empty() == quota.group.empty()) return usage_error("give --user NAME or --group NAME (one of them)");
  const auto [who, target] = quota_subject(quota);
  return print_or_fail(options, call(options, "DELETE", target), "Quota of " + who + " removed.");
}

int quota_list(const ConnectionOptions& options) {
  int rc = 0;
  auto res = fetch_for_table(options, "/api/quotas", rc);
  if (!res) return rc;
  // "used/limit" for each limit set, "used" alone for the others.
  const auto cell = [](const json& entry, const char* limit, const char* used, bool memory, bool cpus) {
    const int64_t have = entry["use"][used].get<int64_t>();
    const auto text = [&](int64_t n) {
      return memory ? format_memory(n) : cpus ? format_cpus(n) : std::to_string(n);
    };
    return entry[limit].is_null() ? text(have) : text(have) + "/" + text(entry[limit].get<int64_t>());
  };
  Table table({"KIND", "NAME", "GPUS", "CPUS", "MEMORY", "RUNNING JOBS", "MAX PRIORITY", "NO-PREEMPT"});
  for (const char* kind : {"users", "groups"}) {
    for (const auto& [name, entry] : res.value()[kind].items()) {
      table.add({std::string(kind) == "users" ? "user" : "group", name, cell(entry, "max_gpus", "gpus", false, false),
                 cell(entry, "max_cpu_millis", "cpu_millis", false, true), cell(entry, "max_memory", "memory", true, false),
                 cell(entry, "max_running_jobs", "running_jobs", false, false),
                 entry["max_priority"].is_null() ? "-" : entry["max_priority"].dump(),
                 entry.value("allow_no_preempt", false) ? "allowed" : "-"});
    }
  }
  if (res.value()["users"].empty() && res.value()["groups"].empty()) {
    std::cout << "No quotas: every user may use the whole cluster. Set one with `ag quota set --user NAME --max-gpus N`.\n";
    return 0;
  }
  table.print(std::cout);
  return 0;
}

// ---- queues --------------------------------------------------------------------------

int queue_create(const ConnectionOptions& options, const QueueOptions& queue) {
  json body = json::object();
  json labels = json::object();
  for (const auto& pair : queue.nodes_with) {
    const size_t eq = pair.find('=');
    if (eq == std::string::npos || eq == 0) {
      return usage_error("--nodes-with takes KEY=VALUE (a label the queue's nodes have, see `ag start-worker "
                         "--label`); got '" + pair + "'");
    }
    labels[pair.substr(0, eq)] = pair.substr(eq + 1);
  }
  body["nodes_with"] = labels;
  if (!queue.priority.empty()) {
    int64_t number = 0;
    auto [end, ec] = std::from_chars(queue.priority.data(), queue.priority.data() + queue.priority.size(), number);
    const bool whole = ec == std::errc() && end == queue.priority.data() + queue.priority.size();
    body["priority"] = whole ? json(number) : json(queue.priority);
  }
  body["preempt"] = queue.preempt;
  if (queue.max_gpus_per_user) body["max_gpus_per_user"] = *queue.max_gpus_per_user;
  if (queue.max_cpus_per_user) body["max_cpu_millis_per_user"] = static_cast<int64_t>(*queue.max_cpus_per_user * 1000);
  if (queue.max_memory_gb_per_user) {
    body["max_memory_per_user"] = static_cast<int64_t>(*queue.max_memory_gb_per_user * (int64_t{1} << 30));
  }
  if (queue.max_running_jobs_per_user) body["max_running_jobs_per_user"] = *queue.max_running_jobs_per_user;
  if (queue.idle_gpu_timeout_s) body["idle_gpu_timeout"] = *queue.idle_gpu_timeout_s;
  auto res = call(options, "PUT", "/api/queues/" + net::url_encode(queue.name), body);
  const bool updated = res.ok() && res.value().value("updated", false);
  return print_or_fail(options, res,
                       "Queue " + queue.name + (updated ? " updated." : " created.") + " Submit to it with `ag submit --queue " +
                           queue.name + " ...`.");
}

int queue_remove(const ConnectionOptions& options, const std::string& name) {
  return print_or_fail(options, call(options, "DELETE", "/api/queues/" + net::url_encode(name)),
                       "Queue " + name + " removed.");
}

int queue_list(const ConnectionOptions& options) {
  int rc = 0;
  auto res = fetch_for_table(options, "/api/queues", rc);
  if (!res) return rc;
  if (res.value()["queues"].empty()) {
    std::cout << "No queues: jobs may run on any node. An admin makes one with `ag queue create NAME --nodes-with "
                 "KEY=VALUE`.\n";
    return 0;
  }
  Table table({"QUEUE", "NODES WITH", "NODES", "PRIORITY", "PREEMPT", "PENDING", "RUNNING", "GPUS", "CPUS",
               "PER USER"});
  for (const auto& q : res.value()["queues"]) {
    std::string labels;
    for (const auto& [key, value] : q["nodes_with"].items()) {
      labels += (labels.empty() ? "" : ",") + key + "=" + value.get<std::string>();
    }
    std::string limits;
    const auto limit = [&limits, &q](const char* field, const std::string& unit, bool memory, bool cpus) {
      if (q[field].is_null()) return;
      const int64_t n = q[field].get<int64_t>();
      limits += (limits.empty() ? "" : " ") + (memory ? format_memory(n) : cpus ? format_cpus(n) : std::to_string(n)) + unit;
    };
    limit("max_gpus_per_user", " GPUs", false, false);
    limit("max_cpu_millis_per_user", " CPUs", false, true);
    limit("max_memory_per_user", "", true, false);
    limit("max_running_jobs_per_user", " jobs", false, false);
    table.add({q["name"].get<std::string>(), labels.empty() ? "(any)" : labels, q["nodes"].dump(), q["priority"].dump(),
               q["preempt"].get<bool>() ? "yes" : "no", q["pending_jobs"].dump(), q["running_jobs"].dump(),
               q["gpus_held"].dump(), format_cpus(q["cpu_millis_held"].get<int64_t>()), limits.empty() ? "-" : limits});
  }
  table.print(std::cout);
  return 0;
}

int share(const ConnectionOptions& options) {
  int rc = 0;
  auto res = fetch_for_table(options, "/api/share", rc);
  if (!res) return rc;
  if (res.value()["users"].empty()) {
    std::cout << "No usage yet: every user has a full share.\n";
    return 0;
  }
  // Usage in GPU-equivalent hours, decayed; parts and shares in percent.
  const auto fixed = [](double value, int digits) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.*f", digits, value);
    return std::string(buf);
  };
  Table table({"USER", "USAGE (GPU-H)", "USAGE %", "SHARE %", "FAIR SHARE", "RUNNING", "PENDING"});
  for (const auto& u : res.value()["users"]) {
    table.add({u["user"].get<std::string>().empty() ? "(none)" : u["user"].get<std::string>(),
               fixed(u["usage"].get<double>() / 3600.0, 2), fixed(u["usage_part"].get<double>() * 100, 1),
               fixed(u["share"].get<double>() * 100, 1), fixed(u["fair_share"].get<double>(), 3),
               u["running_jobs"].dump(), u["pending_jobs"].dump()});
  }
  table.print(std::cout);
  return 0;
}

}  // namespace ag::cli
