#include "head/rest/api_routes.h"

#include <charconv>
#include <boost/asio/steady_timer.hpp>
#include <nlohmann/json.hpp>

#include "api/job_spec.h"
#include "common/sha256.h"
#include "common/version.h"
#include "head/jobs/job_codec.h"
#include "head/nodes/node_codec.h"
#include "head/rest/route_helpers.h"
#include "net/auth.h"

namespace ag::head {
namespace {

using nlohmann::json;
using net::HttpResponse;

constexpr int64_t kMaxWaitMs = 60000;
// Tasks a node page lists: every live one, then the most recent finished ones.
constexpr size_t kMaxNodeTasks = 100;

}  // namespace

Principal ApiRoutes::authenticate(const net::HttpRequest& req) const {
  std::string_view bearer = net::bearer_token(req);
  if (!bearer.empty() || !req.header("authorization").empty()) return deps_.access.authenticate_token(bearer);
  std::string session = net::cookie_value(req, deps_.access.cookie_name());
  if (session.empty()) return {};
  return deps_.access.authenticate_session(session);
}

std::optional<net::HttpResponse> ApiRoutes::refuse_unauthorized(const net::HttpRequest& req,
                                                                const Principal& who) const {
  if (who.kind == Principal::Kind::kNone) {
    if (req.method == "GET" && dashboard::DashboardRoutes::is_page(req.path)) return deps_.dashboard.sign_in_page(401);
    return error_response(401, who.refusal.empty()
                                   ? "missing credential: send 'Authorization: Bearer <token>' with your user token "
                                     "(`ag user add` makes one; the first admin's is in the head's data dir, file "
                                     "'token'), or sign in to the dashboard"
                                   : "the head refused the credential: " + who.refusal);
  }
  // The browser attaches the cookie to requests other sites make it send; only the
  // head's own pages may change state with it. A bearer token is never attached by a
  // browser on its own, so it needs no such check.
  if (who.via_cookie() && net::is_state_changing(req.method) && !net::passes_csrf_check(req)) {
    return error_response(403, "cross-site request refused: a " + req.method +
                                   " signed in by the dashboard cookie must come from the dashboard's own "
                                   "pages (matching Origin, or the X-AG-CSRF header)");
  }
  if (who.kind == Principal::Kind::kJoin) {
    return error_response(403, "a join token can only register a worker node (`ag start-worker --token-file FILE`); "
                               "use a user token for the API");
  }
  if (who.kind == Principal::Kind::kNode &&
      !((req.method == "GET" || req.method == "HEAD") && req.path.rfind("/api/packages/", 0) == 0)) {
    return error_response(403, "node " + who.name +
                                   "'s credential can only speak the worker protocol and fetch packages; use a "
                                   "user token for the API");
  }
  return std::nullopt;
}

net::Respond ApiRoutes::audited(const net::HttpRequest& req, const Principal& who, net::Respond respond) {
  if (!net::is_state_changing(req.method)) return respond;
  std::string action = req.method + " " + req.path;
  if (req.method == "POST" && req.path == "/api/users") {
    json body = json::parse(req.body, nullptr, false);
    if (body.is_object() && body.contains("name") && body["name"].is_string()) {
      action += " (" + body["name"].get<std::string>().substr(0, 64) + ")";
    }
  }
  bool submit = req.method == "POST" && (req.path == "/api/jobs" || req.path == "/api/jobs/batch");
  return [this, action, submit, actor = who.name, from = req.remote_address,
          respond = std::move(respond)](net::HttpResponse res) {
    // Accepted submissions are on record with their jobs (owner, address, time).
    if (!(submit && res.status < 300)) {
      std::string outcome = "ok";
      if (res.status >= 300) {
        json body = json::parse(res.body, nullptr, false);
        std::string message = body.is_object() && body.contains("error") && body["error"].is_string()
                                  ? body["error"].get<std::string>()
                                  : "";
        if (message.size() > 300) message = message.substr(0, 300) + "...";
        outcome = "HTTP " + std::to_string(res.status) + (message.empty() ? "" : ": " + message);
      }
      deps_.audit.record({deps_.clock.now_ms(), actor, from, action, outcome});
    }
    respond(std::move(res));
  };
}

void ApiRoutes::handle(const net::HttpRequest& req, net::Respond respond) {
  // The time too: `ag doctor` compares clocks with it.
  if (req.path == "/api/healthz") return respond(json_response(200, {{"status", "ok"}, {"time_ms", deps_.clock.now_ms()}}));
  if (req.path == "/api/tls/ca") {
    if (ca_pem_.empty()) return respond(error_response(404, "this head runs without TLS (--insecure)"));
    return respond({200, "application/x-pem-file", ca_pem_});
  }
  if (deps_.dashboard.handle_public(req, respond)) return;
  Principal who = authenticate(req);
  if (auto refusal = refuse_unauthorized(req, who)) {
    // A refused change by a known caller is on record; an unknown one is only logged,
    // so that a stranger cannot flood the audit log.
    if (who.kind != Principal::Kind::kNone) return audited(req, who, std::move(respond))(std::move(*refusal));
    return respond(std::move(*refusal));
  }
  respond = audited(req, who, std::move(respond));
  if (deps_.dashboard.handle(req, who, respond)) return;
  handle_authenticated(req, who, std::move(respond));
}

bool ApiRoutes::may_act_on(const Principal& who, const Job& job) const {
  return may_act_on_job(who, job.owner, deps_.access.groups_of(job.owner));
}

json ApiRoutes::job_view(const Principal& who, const Job& job) const {
  json doc = job_to_json(job);
  doc["failure"] = failure_json(job);
  if (job.state == JobState::kPending) {
    const auto positions = queue_positions(deps_.jobs);
    if (auto at = positions.find(job.queue_seq); at != positions.end()) doc["queue_position"] = at->second;
  }
  const bool may_act = may_act_on(who, job);
  // For pages that offer a stop button or logs only to those who may use them.
  doc["caller_may_act"] = may_act;
  if (!may_act) {
    // Output is for those who may read the logs.
    if (doc["failure"].is_object()) doc["failure"].erase("last_lines");
    for (auto& attempt : doc["attempts"]) attempt.erase("last_lines");
    json& env = doc["spec"]["runtime_env"];
    if (env.is_object() && env.contains("env_vars")) {
      env.erase("env_vars");
      env["env_vars_hidden"] = true;
    }
  }
  return doc;
}

namespace {
HttpResponse forbidden(const std::string& message) { return error_response(403, message); }

HttpResponse not_your_job(const Job& job, const std::string& what) {
  return forbidden("job " + job.id + " belongs to " + (job.owner.empty() ? "no user" : job.owner) +
                   "; only its owner, members of the owner's groups and admins can " + what);
}

const char* kAdminOnly = "only an admin can do this; ask one, or use an admin's token";
}  // namespace

namespace {
const std::string kPackagesPrefix = "/api/packages/";

// The hash in /api/packages/{hash} (an optional "sha256:" before it).
std::string package_hash(const std::string& path) {
  std::string hash = path.substr(kPackagesPrefix.size());
  if (hash.rfind("sha256:", 0) == 0) hash = hash.substr(7);
  return hash;
}

HttpResponse bad_hash(const std::string& hash) {
  return error_response(400, "'" + hash + "' is not a package hash; expected 64 lowercase hex digits");
}
}  // namespace

net::BodyPlan ApiRoutes::plan_body(const net::HttpRequest& req) {
  if (req.method != "PUT" || req.path.rfind(kPackagesPrefix, 0) != 0) {
    // Any other body is read only from a caller with a valid credential: a stranger's
    // megabytes are never held (the sign-in page's own POST is the one exception).
    const bool has_body = !req.header("content-length").empty() || !req.header("transfer-encoding").empty();
    if (!has_body || req.path == "/api/session" || req.header("content-length") == "0") return {};
    Principal who = authenticate(req);
    if (who.kind == Principal::Kind::kNone) return {nullptr, refuse_unauthorized(req, who)};
    return {};
  }
  // Checked before a byte of the upload is taken: a refused upload is never stored.
  Principal who = authenticate(req);
  if (auto refusal = refuse_unauthorized(req, who)) return {nullptr, std::move(refusal)};
  if (!may_submit(who)) return {nullptr, forbidden("user " + who.name + " is a viewer: viewers cannot upload packages")};
  std::string hash = package_hash(req.path);
  if (!is_sha256_hex(hash)) return {nullptr, bad_hash(hash)};
  auto upload = deps_.packages.begin_upload(hash);
  if (!upload.ok()) return {nullptr, error_response(upload.error())};
  return {std::move(upload.value()), std::nullopt};
}

void ApiRoutes::handle_authenticated(const net::HttpRequest& req, const Principal& who, net::Respond respond) {
  const std::string& path = req.path;
  if (path.rfind("/api/packages", 0) == 0) return handle_packages(req, who, respond);
  if (path == "/api/whoami") {
    return respond(json_response(200, {{"name", who.name}, {"role", to_string(who.role)}, {"groups", who.groups}}));
  }
  if (path == "/api/users" || path.rfind("/api/users/", 0) == 0) return handle_users(req, who, respond);
  if (path == "/api/tokens" || path.rfind("/api/tokens/", 0) == 0) {
    if (!who.is_admin()) return respond(forbidden(std::string("join tokens: ") + kAdminOnly));
    return handle_tokens(req, who, respond);
  }
  if (path == "/api/audit") {
    if (!who.is_admin()) return respond(forbidden(std::string("the audit log: ") + kAdminOnly));
    return handle_audit(req, std::move(respond));
  }
  if (path == "/api/version") {
    const BuildInfo& info = build_info();
    return respond(json_response(200, {{"version", info.version}, {"commit", info.commit},
                                       {"build_type", info.build_type}, {"worker_protocol", kWorkerProtocol},
                                       {"oldest_worker_protocol", kOldestWorkerProtocol}}));
  }
  if (path == "/api/nodes" || path == "/api/cluster") {
    if (req.method != "GET") return respond(error_response(405, "use GET for " + path));
    auto alloc = deps_.jobs.table.allocations();
    json nodes = json::array();
    Resources total, used;
    int alive = 0;
    for (const auto& [id, node] : deps_.nodes.nodes()) {
      nodes.push_back(node_to_json(node, alloc[id]));
      if (node.state == NodeState::kAlive) {
        ++alive;
        total += node.total;
        used += alloc[id];
      }
    }
    if (path == "/api/nodes") return respond(json_response(200, {{"nodes", nodes}}));
    json by_state = json::object();
    for (auto s : {JobState::kPending, JobState::kRunning, JobState::kSucceeded, JobState::kFailed, JobState::kStopped}) {
      by_state[to_string(s)] = 0;
    }
    for (const auto& [s, n] : deps_.jobs.table.count_by_state()) by_state[to_string(s)] = n;
    return respond(json_response(
        200, {{"nodes_alive", alive},
              {"nodes_total", deps_.nodes.nodes().size()},
              {"resources", {{"num_cpus", total.cpu_millis / 1000.0}, {"memory_bytes", total.memory_bytes}, {"num_gpus", total.gpus}}},
              {"allocated", {{"num_cpus", used.cpu_millis / 1000.0}, {"memory_bytes", used.memory_bytes}, {"num_gpus", used.gpus}}},
              {"jobs", by_state},
              {"tls", !ca_pem_.empty()},
              {"version", version_line()}}));
  }
  if (path == "/api/jobs") {
    if (req.method == "GET") return handle_list_jobs(req, std::move(respond));
    if (req.method != "POST") return respond(error_response(405, "use GET or POST for /api/jobs"));
    if (!may_submit(who)) return respond(forbidden("user " + who.name + " is a viewer: viewers cannot submit jobs"));
    json body = json::parse(req.body, nullptr, false);
    if (body.is_discarded()) {
      return respond(error_response(400, "request body is not valid JSON; send a job spec object such as {\"entrypoint\": \"python train.py\", \"num_workers\": 2}"));
    }
    auto spec = api::parse_job_spec(body);
    if (!spec.ok()) return respond(error_response(spec.error()));
    if (auto err = check_references(spec.value())) return respond(error_response(*err));
    const size_t array_size = spec.value().array ? spec.value().array->indices.size() : 0;
    deps_.jobs.controller.submit(
        std::move(spec.value()),
        [respond, array_size](Result<std::string> id) {
          if (!id.ok()) return respond(error_response(id.error()));
          json body = {{"job_id", id.value()}};
          if (array_size > 0) body["array_size"] = array_size;
          respond(json_response(201, body));
        },
        {who.name, req.remote_address, who.is_admin()});
    return;
  }
  if (path.rfind("/api/images/", 0) == 0) return handle_images(req, who, respond);
  if (path.rfind("/api/nodes/", 0) == 0) return handle_node(req, who, path.substr(std::string("/api/nodes/").size()), respond);
  if (path == "/api/jobs/batch") return handle_submit_batch(req, who, respond);
  if (path == "/api/quotas") return handle_quotas(req, who, "", respond);
  if (path == "/api/share") return handle_share(req, respond);
  if (path == "/api/queues") return handle_queues(req, who, "", respond);
  if (path.rfind("/api/queues/", 0) == 0) return handle_queues(req, who, path.substr(std::string("/api/queues/").size()), respond);
  if (path.rfind("/api/quotas/", 0) == 0) return handle_quotas(req, who, path.substr(std::string("/api/quotas/").size()), respond);
  static const std::string kJobsPrefix = "/api/jobs/";
  if (path.rfind(kJobsPrefix, 0) == 0) {
    std::string rest = path.substr(kJobsPrefix.size());
    size_t slash = rest.find('/');
    std::string id = rest.substr(0, slash);
    // The submission_id the caller chose works as the job's id too.
    if (!deps_.jobs.table.find(id)) {
      if (const Job* submitted = deps_.jobs.table.find_submission(who.name, id)) id = submitted->id;
    }
    std::string action = slash == std::string::npos ? "" : rest.substr(slash + 1);
    return handle_job(req, who, id, action, std::move(respond));
  }
  respond(error_response(404, "no route for " + req.method + " " + path));
}

void ApiRoutes::handle_node(const net::HttpRequest& req, const Principal& who, const std::string& path,
                            const net::Respond& respond) {
  const std::string node_id = path.substr(0, path.find('/'));
  const std::string action = path.size() > node_id.size() ? path.substr(node_id.size() + 1) : "";
  if (action == "drain" || action == "resume") {
    if (req.method != "POST") return respond(error_response(405, "use POST to " + action + " a node"));
    if (!who.is_admin()) return respond(forbidden("draining or resuming a node: " + std::string(kAdminOnly)));
    const bool draining = action == "drain";
    return deps_.jobs.changes.set_draining(node_id, draining, [respond, node_id, draining](const Status& s) {
      if (!s) return respond(error_response(s.error()));
      respond(json_response(200, {{"node_id", node_id}, {"draining", draining}}));
    });
  }
  if (!action.empty()) return respond(error_response(404, "no route for " + req.method + " " + req.path));
  if (req.method == "DELETE") {
    if (!who.is_admin()) return respond(forbidden(std::string("removing a node: ") + kAdminOnly));
    return deps_.gateway.remove_node(node_id, [respond, node_id](const Status& s) {
      if (!s) return respond(error_response(s.error()));
      respond(json_response(200, {{"node_id", node_id}, {"removed", true}}));
    });
  }
  if (req.method != "GET") return respond(error_response(405, "use GET for /api/nodes/{id}, DELETE to remove the node"));
  const Node* node = deps_.nodes.find(node_id);
  if (!node) return respond(error_response(404, "no node with id '" + node_id + "'; list nodes with `ag list-nodes`"));
  json out = node_to_json(*node, deps_.jobs.table.allocations()[node_id]);
  json usage = json::array();
  for (const auto& u : node->usage) usage.push_back(usage_to_json(u));
  out["usage"] = usage;
  // The node's tasks, newest job first: live ones (all of them), then finished ones up
  // to kMaxNodeTasks in all.
  json live = json::array(), finished = json::array();
  for (const Job* job : deps_.jobs.table.list()) {
    if (live.size() + finished.size() >= kMaxNodeTasks && job->terminal()) continue;
    for (auto a = job->attempts.rbegin(); a != job->attempts.rend(); ++a) {
      for (const auto& t : a->tasks) {
        if (t.node_id != node_id) continue;
        bool is_live = !t.terminal() && !job->terminal();
        json& into = is_live ? live : finished;
        if (!is_live && live.size() + finished.size() >= kMaxNodeTasks) continue;
        into.push_back({{"job_id", job->id}, {"job_name", job->spec.name}, {"job_state", to_string(job->state)},
                        {"attempt", a->number}, {"task_index", t.index}, {"state", to_string(t.state)},
                        {"pid", t.pid}, {"gpu_ids", t.gpu_ids}, {"started_ms", t.started_ms},
                        {"finished_ms", t.finished_ms},
                        {"exit_code", t.exit_code ? json(*t.exit_code) : json(nullptr)}});
      }
    }
  }
  for (auto& t : finished) live.push_back(std::move(t));
  out["tasks"] = std::move(live);
  respond(json_response(200, out));
}

void ApiRoutes::handle_job(const net::HttpRequest& req, const Principal& who, const std::string& job_id,
                           const std::string& action, net::Respond respond) {
  const Job* job = deps_.jobs.table.find(job_id);
  if (!job) {
    if (const JobArray* array = deps_.jobs.arrays.find(job_id)) {
      return handle_array(req, who, *array, job_id, action, respond);
    }
    return respond(error_response(404, "no job with id '" + job_id + "'; list jobs with `ag list-jobs`"));
  }
  if (action.empty() && req.method == "DELETE") {
    if (!may_act_on(who, *job)) return respond(not_your_job(*job, "delete it"));
    const std::string package = job->spec.runtime_env.working_dir.empty() ? "" : job->spec.runtime_env.working_dir_hash();
    return deps_.jobs.retention.delete_job(job->id, [this, respond, id = job->id, package](const Status& s) {
      if (!s) {
        if (s.error().code == ErrorCode::kResourceExhausted) {
          return respond(error_response(507, "the deletion could not be stored (" + s.error().message +
                                                 "); the job is kept: free space on the head and delete it again"));
        }
        return respond(error_response(s.error()));
      }
      // Its package goes with it unless another job still has it.
      const bool package_removed =
          !package.empty() && deps_.jobs.table.package_use(package) == JobTable::PackageUse::kUnused && deps_.packages.remove(package);
      respond(json_response(200, {{"job_id", id}, {"deleted", true}, {"package_removed", package_removed}}));
    });
  }
  if (action.empty()) {
    if (req.method != "GET") return respond(error_response(405, "use GET or DELETE for /api/jobs/{id}"));
    return respond(json_response(200, job_view(who, *job)));
  }
  if (action == "events") {
    json events = json::array();
    for (const auto& e : deps_.jobs.table.events(job_id)) events.push_back(event_to_json(e));
    return respond(json_response(200, {{"job_id", job_id}, {"events", events}}));
  }
  if (action == "stop") {
    if (req.method != "POST") return respond(error_response(405, "use POST to stop a job"));
    if (!may_act_on(who, *job)) return respond(not_your_job(*job, "stop it"));
    return deps_.jobs.controller.stop(job_id, who.name, [this, respond, job_id](const Status& s) {
      if (!s) {
        if (s.error().code == ErrorCode::kResourceExhausted) {
          return respond(error_response(507, "the stop could not be stored (" + s.error().message +
                                                 "), so it was not carried out; free space on the head and stop "
                                                 "the job again"));
        }
        return respond(error_response(s.error()));
      }
      const Job* now = deps_.jobs.table.find(job_id);
      respond(json_response(200, {{"job_id", job_id}, {"state", now ? to_string(now->state) : "STOPPED"}}));
    });
  }
  if (action == "hold" || action == "release") {
    const bool hold = action == "hold";
    if (req.method != "POST") return respond(error_response(405, "use POST to " + action + " a job"));
    if (!may_act_on(who, *job)) return respond(not_your_job(*job, action + " it"));
    return deps_.jobs.controller.set_hold(job_id, hold, who.name, [this, respond, job_id](const Status& s) {
      if (!s) return respond(error_response(s.error()));
      const Job* now = deps_.jobs.table.find(job_id);
      respond(json_response(200, {{"job_id", job_id},
                                  {"state", now ? to_string(now->state) : "PENDING"},
                                  {"held_by", now && !now->held_by.empty() ? json(now->held_by) : json(nullptr)},
                                  {"message", now ? now->message : ""}}));
    });
  }
  if (action == "logs") {
    if (!may_act_on(who, *job)) return respond(not_your_job(*job, "read its logs"));
    return log_routes_.handle_logs(req, job_id, std::move(respond));
  }
  if (action == "usage") {
    if (req.method != "GET") return respond(error_response(405, "use GET for a job's usage"));
    json samples = json::array();
    for (const auto& u : deps_.gateway.job_usage().series(job->id, deps_.clock.now_ms())) {
      samples.push_back({{"time_ms", u.time_ms}, {"cpu_percent", u.cpu_percent}, {"memory_bytes", u.memory_bytes},
                         {"tasks", u.tasks}, {"gpus", u.gpus}, {"gpu_percent", u.gpu_percent},
                         {"gpu_memory_bytes", u.gpu_memory_bytes}});
    }
    return respond(json_response(200, {{"job_id", job->id}, {"interval_ms", JobUsage::kBucketMs}, {"samples", samples}}));
  }
  if (action == "lines") {
    if (!may_act_on(who, *job)) return respond(not_your_job(*job, "read its logs"));
    return log_routes_.handle_lines(req, job_id, std::move(respond));
  }
  if (action == "wait") return handle_wait(req, who, job_id, std::move(respond));
  respond(error_response(404, "no route for " + req.method + " " + req.path));
}

void ApiRoutes::handle_wait(const net::HttpRequest& req, const Principal& who, const std::string& job_id,
                            net::Respond respond) {
  int64_t timeout_ms = 30000, attempts_at_least = INT64_MAX;
  if (!query_int(req, "timeout_ms", 0, kMaxWaitMs, &timeout_ms, respond) ||
      !query_int(req, "attempts_at_least", 0, INT64_MAX, &attempts_at_least, respond)) {
    return;
  }
  // Also answers once the job's message is no longer this one (a client showing why a
  // job waits hears of each new reason).
  std::optional<std::string> changed_from;
  if (auto it = req.query.find("changed_from"); it != req.query.end()) changed_from = it->second;
  struct WaitState {
    boost::asio::steady_timer timer;
    uint64_t watch_id = 0;
    bool done = false;
    std::function<void()> check;
    explicit WaitState(boost::asio::io_context& io) : timer(io) {}
  };
  // The timer's handler owns the state; the callbacks only refer to it, so nothing
  // keeps a finished wait alive and a callback never destroys itself while it runs.
  auto state = std::make_shared<WaitState>(deps_.io);
  std::weak_ptr<WaitState> weak = state;
  auto finish = [this, who, job_id, respond, weak]() {
    auto s = weak.lock();
    if (!s || s->done) return;
    s->done = true;
    s->timer.cancel();
    deps_.jobs.events.cancel_watch(s->watch_id);
    const Job* job = deps_.jobs.table.find(job_id);
    if (!job) return respond(error_response(404, "job " + job_id + " was deleted"));
    respond(json_response(200, job_view(who, *job)));
  };
  // Answers once the job is finished or has the asked number of attempts; otherwise
  // waits for the job's next change and looks again.
  state->check = [this, job_id, attempts_at_least, changed_from, weak, finish]() {
    auto s = weak.lock();
    if (!s || s->done) return;
    const Job* job = deps_.jobs.table.find(job_id);
    if (!job || job->terminal() || static_cast<int64_t>(job->attempts.size()) >= attempts_at_least ||
        (changed_from && job->message != *changed_from)) {
      return finish();
    }
    s->watch_id = watch_job(deps_.jobs, job_id, [weak]() {
      if (auto again = weak.lock()) again->check();
    });
  };
  state->check();
  if (state->done) return;
  state->timer.expires_after(std::chrono::milliseconds(timeout_ms));
  state->timer.async_wait([state, finish](const boost::system::error_code& ec) {
    if (!ec) finish();
  });
}

std::optional<Error> ApiRoutes::check_references(const api::JobSpec& spec) const {
  const api::RuntimeEnv& env = spec.runtime_env;
  if (!env.working_dir.empty()) deps_.packages.touch(env.working_dir_hash());
  if (!env.working_dir.empty() && !deps_.packages.contains(env.working_dir_hash())) {
    return invalid_argument("field 'runtime_env.working_dir': package " + env.working_dir +
                            " was never uploaded to this head; upload it with PUT /api/packages/<hash> first "
                            "(the SDK and `ag submit --working-dir` do this for you)");
  }
  return std::nullopt;
}

void ApiRoutes::handle_submit_batch(const net::HttpRequest& req, const Principal& who, const net::Respond& respond) {
  if (req.method != "POST") return respond(error_response(405, "use POST for /api/jobs/batch"));
  if (!may_submit(who)) return respond(forbidden("user " + who.name + " is a viewer: viewers cannot submit jobs"));
  json body = json::parse(req.body, nullptr, false);
  if (body.is_discarded() || !body.is_object() || !body.contains("jobs") || !body["jobs"].is_array()) {
    return respond(error_response(400, "request body must be {\"jobs\": [job spec, ...]}"));
  }
  if (body["jobs"].empty() || body["jobs"].size() > 10000) {
    return respond(error_response(400, "'jobs' must hold 1 to 10000 job specs, got " + std::to_string(body["jobs"].size())));
  }
  // Every spec is checked before any is accepted: all or none.
  std::vector<api::JobSpec> specs;
  for (size_t i = 0; i < body["jobs"].size(); ++i) {
    auto spec = api::parse_job_spec(body["jobs"][i]);
    std::optional<Error> err = spec.ok() ? check_references(spec.value()) : std::optional<Error>(spec.error());
    if (err) {
      return respond(error_response(400, "jobs[" + std::to_string(i) + "]: " + err->message + " (no job was submitted)"));
    }
    specs.push_back(std::move(spec.value()));
  }
  deps_.jobs.controller.submit_all(
      std::move(specs),
      [respond](Result<std::vector<std::string>> ids) {
        if (!ids.ok()) return respond(error_response(ids.error()));
        respond(json_response(201, {{"job_ids", ids.value()}}));
      },
      {who.name, req.remote_address, who.is_admin()});
}

void ApiRoutes::handle_packages(const net::HttpRequest& req, const Principal& who, const net::Respond& respond) {
  PackageStore& store = deps_.packages;
  // Packages hold jobs' code: nodes fetch them, users upload and fetch them; viewers
  // see only the counters.
  if (req.path != "/api/packages" && who.kind == Principal::Kind::kUser && who.role == Role::kViewer) {
    return respond(forbidden("user " + who.name + " is a viewer: viewers cannot read or upload packages"));
  }
  if (req.path == "/api/packages") {
    if (req.method != "GET") return respond(error_response(405, "use GET for /api/packages"));
    return respond(json_response(200, {{"packages", store.count()},
                                       {"bytes_uploaded", store.bytes_uploaded()},
                                       {"uploads", store.uploads()},
                                       {"max_package_bytes", store.max_package_bytes()},
                                       {"stored_bytes", store.stored_bytes()},
                                       {"quota_bytes", store.quota_bytes()}}));
  }
  std::string hash = package_hash(req.path);
  if (!is_sha256_hex(hash)) return respond(bad_hash(hash));
  if (req.method == "HEAD") {
    // A client about to submit with this package asks first: it is in use again.
    if (!store.contains(hash)) return respond({404, "application/octet-stream", ""});
    store.touch(hash);
    return respond({200, "application/octet-stream", ""});
  }
  if (req.method == "GET") {
    auto file = store.file(hash);
    if (!file.ok()) return respond(error_response(file.error()));
    HttpResponse res{200, "application/octet-stream", ""};
    res.body_file = file.value();
    return respond(std::move(res));
  }
  if (req.method != "PUT") return respond(error_response(405, "use HEAD, GET or PUT for /api/packages/{hash}"));
  // Uploads normally arrive streamed into the store (plan_body); a body held in
  // memory is stored the same way.
  auto upload = std::dynamic_pointer_cast<PackageUpload>(req.body_sink);
  if (req.body_sink && (!upload || upload->hash() != hash)) {
    return respond(error_response(500, "upload of sha256:" + hash + " was not streamed into the package store"));
  }
  int64_t size = upload ? upload->size() : static_cast<int64_t>(req.body.size());
  auto answer = [respond, hash, size](Result<bool> stored) {
    if (!stored.ok()) return respond(error_response(stored.error()));
    respond(json_response(stored.value() ? 201 : 200, {{"hash", "sha256:" + hash},
                                                       {"size", size},
                                                       {"stored", stored.value()}}));
  };
  if (!upload) return answer(store.put(hash, req.body));
  store.finish_upload_async(deps_.io, upload, answer);
}

namespace {

json user_json(const UserRecord& u) {
  return {{"name", u.name},         {"role", to_string(u.role)}, {"groups", u.groups},
          {"disabled", u.disabled}, {"created_ms", u.created_ms}, {"token_issued_ms", u.token_issued_ms},
          {"created_by", u.created_by}};
}

// Reads {"groups": ["a", ...]} (optional). Returns false with a 400 on bad input.
bool read_groups(const json& body, std::vector<std::string>* groups, const net::Respond& respond) {
  if (!body.contains("groups") || body["groups"].is_null()) return true;
  const json& g = body["groups"];
  if (!g.is_array() || g.size() > 32) {
    respond(error_response(400, "field 'groups': expected a list of at most 32 group names"));
    return false;
  }
  for (const auto& name : g) {
    if (!name.is_string()) {
      respond(error_response(400, "field 'groups': expected a list of group names (strings)"));
      return false;
    }
    groups->push_back(name.get<std::string>());
  }
  return true;
}

}  // namespace

void ApiRoutes::handle_users(const net::HttpRequest& req, const Principal& who, const net::Respond& respond) {
  static const std::string kPrefix = "/api/users/";
  if (req.path == "/api/users") {
    if (!who.is_admin()) return respond(forbidden(std::string("managing users: ") + kAdminOnly));
    if (req.method == "GET") {
      json users = json::array();
      for (const auto& u : deps_.access.users()) users.push_back(user_json(u));
      return respond(json_response(200, {{"users", users}}));
    }
    if (req.method != "POST") return respond(error_response(405, "use GET or POST for /api/users"));
    json body = json::parse(req.body, nullptr, false);
    if (!body.is_object() || !body.contains("name") || !body["name"].is_string()) {
      return respond(error_response(400, "send {\"name\": \"alice\", \"role\": \"user\", \"groups\": [...]}"));
    }
    UserRecord user;
    user.name = body["name"].get<std::string>();
    std::string role = body.value("role", std::string("user"));
    auto parsed = body.contains("role") && !body["role"].is_string() ? std::nullopt : parse_role(role);
    if (!parsed) return respond(error_response(400, "field 'role': use admin, user or viewer"));
    user.role = *parsed;
    if (!read_groups(body, &user.groups, respond)) return;
    user.created_by = who.name;
    UserRecord shown = user;
    return deps_.access.add_user(std::move(user), [respond, shown](Result<std::string> token) {
      if (!token.ok()) return respond(error_response(token.error()));
      json out = user_json(shown);
      out["token"] = token.value();
      respond(json_response(201, out));
    });
  }
  std::string rest = req.path.substr(kPrefix.size());
  size_t slash = rest.find('/');
  std::string name = rest.substr(0, slash);
  std::string action = slash == std::string::npos ? "" : rest.substr(slash + 1);
  // Anyone may rotate their own token; everything else about users is an admin's.
  bool self = who.name == name && action == "rotate";
  if (!who.is_admin() && !self) return respond(forbidden(std::string("managing users: ") + kAdminOnly));
  if (action.empty()) {
    if (req.method != "GET") return respond(error_response(405, "use GET for /api/users/{name}"));
    const UserRecord* user = deps_.access.find_user(name);
    if (!user) return respond(error_response(404, "no user '" + name + "'; see `ag user list`"));
    return respond(json_response(200, user_json(*user)));
  }
  if (req.method != "POST") return respond(error_response(405, "use POST for /api/users/{name}/" + action));
  if (action == "rotate") {
    return deps_.access.rotate_user(name, [respond, name](Result<std::string> token) {
      if (!token.ok()) return respond(error_response(token.error()));
      respond(json_response(200, {{"name", name}, {"token", token.value()}}));
    });
  }
  if (action == "disable" || action == "enable") {
    return deps_.access.set_user_disabled(name, action == "disable", [respond, name, action](const Result<bool>& done) {
      if (!done.ok()) return respond(error_response(done.error()));
      respond(json_response(200, {{"name", name}, {"disabled", action == "disable"}}));
    });
  }
  respond(error_response(404, "no route for " + req.method + " " + req.path + "; use rotate, disable or enable"));
}

void ApiRoutes::handle_tokens(const net::HttpRequest& req, const Principal& who, const net::Respond& respond) {
  int64_t now = deps_.clock.now_ms();
  auto token_json = [now](const JoinTokenRecord& t) {
    return json{{"id", t.id},
                {"kind", "join"},
                {"created_ms", t.created_ms},
                {"expires_ms", t.expires_ms},
                {"expired", t.expires_ms != 0 && t.expires_ms <= now},
                {"created_by", t.created_by}};
  };
  if (req.path == "/api/tokens") {
    if (req.method == "GET") {
      json tokens = json::array();
      for (const auto& t : deps_.access.join_tokens()) tokens.push_back(token_json(t));
      return respond(json_response(200, {{"tokens", tokens}}));
    }
    if (req.method != "POST") return respond(error_response(405, "use GET or POST for /api/tokens"));
    json body = json::parse(req.body, nullptr, false);
    if (!body.is_object() || body.value("kind", std::string("join")) != "join") {
      return respond(error_response(400, "send {\"kind\": \"join\", \"ttl_s\": SECONDS}; only join tokens are made "
                                         "here (user tokens come with `ag user add`)"));
    }
    int64_t ttl_s = 0;
    if (body.contains("ttl_s")) {
      const json& ttl = body["ttl_s"];
      if (!ttl.is_number_integer() || ttl.get<int64_t>() < 0 || ttl.get<int64_t>() > 10LL * 365 * 24 * 3600) {
        return respond(error_response(400, "field 'ttl_s': expected whole seconds from 0 (never expires) to 10 years"));
      }
      ttl_s = ttl.get<int64_t>();
    }
    return deps_.access.create_join_token(
        ttl_s * 1000, who.name, [respond, token_json](Result<AccessControl::NewJoinToken> made) {
          if (!made.ok()) return respond(error_response(made.error()));
          json out = token_json(made->record);
          out["token"] = made->token;
          respond(json_response(201, out));
        });
  }
  std::string id = req.path.substr(std::string("/api/tokens/").size());
  if (req.method != "DELETE") return respond(error_response(405, "use DELETE /api/tokens/{id} to revoke a join token"));
  deps_.access.revoke_join_token(id, [respond, id](const Result<bool>& done) {
    if (!done.ok()) return respond(error_response(done.error()));
    respond(json_response(200, {{"id", id}, {"revoked", true}}));
  });
}

void ApiRoutes::handle_audit(const net::HttpRequest& req, net::Respond respond) {
  int64_t limit = 100;
  if (!query_int(req, "limit", 1, static_cast<int64_t>(AuditLog::kKeep), &limit, respond)) return;
  json entries = json::array();
  for (const auto& e : deps_.audit.recent(static_cast<size_t>(limit))) {
    entries.push_back(
        {{"time_ms", e.time_ms}, {"actor", e.actor}, {"from", e.from}, {"action", e.action}, {"outcome", e.outcome}});
  }
  respond(json_response(200, {{"entries", entries}}));
}

}  // namespace ag::head
