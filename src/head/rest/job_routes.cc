#include "head/rest/job_routes.h"

#include <boost/asio/steady_timer.hpp>
#include <nlohmann/json.hpp>

#include "api/job_spec.h"
#include "head/jobs/job_codec.h"
#include "head/rest/job_list.h"
#include "head/rest/route_helpers.h"

namespace ag::head {
namespace {

using nlohmann::json;

constexpr int64_t kMaxWaitMs = 60000;

// A 507 for a change the store could not write (a full disk): nothing was done, and
// `then` says what to do.
net::HttpResponse not_stored(const Status& s, const std::string& what, const std::string& then) {
  if (s.error().code != ErrorCode::kResourceExhausted) return error_response(s.error());
  return error_response(507, what + " could not be stored (" + s.error().message + ")" + then);
}

}  // namespace

json JobRoutes::job_view(const Principal& who, const Job& job) const {
  json doc = job_to_json(job);
  doc["failure"] = failure_json(job);
  if (job.state == JobState::kPending) {
    const auto positions = queue_positions(deps_.jobs);
    if (auto at = positions.find(job.queue_seq); at != positions.end()) doc["queue_position"] = at->second;
  }
  const bool may_act = may_act_on(deps_.access, who, job);
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

std::optional<Error> JobRoutes::check_references(const api::JobSpec& spec) const {
  const api::RuntimeEnv& env = spec.runtime_env;
  if (!env.working_dir.empty()) deps_.packages.touch(env.working_dir_hash());
  if (!env.working_dir.empty() && !deps_.packages.contains(env.working_dir_hash())) {
    return invalid_argument("field 'runtime_env.working_dir': package " + env.working_dir +
                            " was never uploaded to this head; upload it with PUT /api/packages/<hash> first "
                            "(the SDK and `ag submit --working-dir` do this for you)");
  }
  return std::nullopt;
}

void JobRoutes::submit(const Call& call, net::Respond respond) {
  json body = json::parse(call.req.body, nullptr, false);
  if (body.is_discarded()) {
    return respond(error_response(400, "request body is not valid JSON; send a job spec object such as "
                                       "{\"entrypoint\": \"python train.py\", \"num_workers\": 2}"));
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
      {call.who.name, call.req.remote_address, call.who.is_admin()});
}

void JobRoutes::submit_batch(const Call& call, net::Respond respond) {
  json body = json::parse(call.req.body, nullptr, false);
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
      {call.who.name, call.req.remote_address, call.who.is_admin()});
}

void JobRoutes::list(const Call& call, net::Respond respond) {
  list_jobs(deps_.jobs, deps_.clock.now_ms(), call.req, std::move(respond));
}

void JobRoutes::show(const Call& call, net::Respond respond) {
  const Job* job = deps_.jobs.table.find(call.param("job"));
  if (!job) return arrays_.handle(call, *deps_.jobs.arrays.find(call.param("job")), "", std::move(respond));
  respond(json_response(200, job_view(call.who, *job)));
}

void JobRoutes::remove(const Call& call, net::Respond respond) {
  const Job* job = deps_.jobs.table.find(call.param("job"));
  if (!job) return arrays_.handle(call, *deps_.jobs.arrays.find(call.param("job")), "", std::move(respond));
  const std::string package = job->spec.runtime_env.working_dir.empty() ? "" : job->spec.runtime_env.working_dir_hash();
  deps_.jobs.retention.delete_job(job->id, [this, respond, id = job->id, package](const Status& s) {
    if (!s) return respond(not_stored(s, "the deletion", "; the job is kept: free space on the head and delete it again"));
    // Its package goes with it unless another job still has it.
    const bool package_removed = !package.empty() &&
                                 deps_.jobs.table.package_use(package) == JobTable::PackageUse::kUnused &&
                                 deps_.packages.remove(package);
    respond(json_response(200, {{"job_id", id}, {"deleted", true}, {"package_removed", package_removed}}));
  });
}

void JobRoutes::events(const Call& call, net::Respond respond) {
  const std::string& job_id = call.param("job");
  if (!deps_.jobs.table.find(job_id)) return arrays_.handle(call, *deps_.jobs.arrays.find(job_id), "events", std::move(respond));
  json events = json::array();
  for (const auto& e : deps_.jobs.table.events(job_id)) events.push_back(event_to_json(e));
  respond(json_response(200, {{"job_id", job_id}, {"events", events}}));
}

void JobRoutes::stop(const Call& call, net::Respond respond) {
  const std::string& job_id = call.param("job");
  if (!deps_.jobs.table.find(job_id)) return arrays_.handle(call, *deps_.jobs.arrays.find(job_id), "stop", std::move(respond));
  deps_.jobs.controller.stop(job_id, call.who.name, [this, respond, job_id](const Status& s) {
    if (!s) {
      return respond(not_stored(s, "the stop", ", so it was not carried out; free space on the head and stop the job again"));
    }
    const Job* now = deps_.jobs.table.find(job_id);
    respond(json_response(200, {{"job_id", job_id}, {"state", now ? to_string(now->state) : "STOPPED"}}));
  });
}

void JobRoutes::hold(const Call& call, net::Respond respond) {
  const std::string& job_id = call.param("job");
  const bool hold = call.req.path.ends_with("/hold");
  if (!deps_.jobs.table.find(job_id)) {
    return arrays_.handle(call, *deps_.jobs.arrays.find(job_id), hold ? "hold" : "release", std::move(respond));
  }
  deps_.jobs.controller.set_hold(job_id, hold, call.who.name, [this, respond, job_id](const Status& s) {
    if (!s) return respond(error_response(s.error()));
    const Job* now = deps_.jobs.table.find(job_id);
    respond(json_response(200, {{"job_id", job_id},
                                {"state", now ? to_string(now->state) : "PENDING"},
                                {"held_by", now && !now->held_by.empty() ? json(now->held_by) : json(nullptr)},
                                {"message", now ? now->message : ""}}));
  });
}

void JobRoutes::logs(const Call& call, net::Respond respond) {
  const std::string& job_id = call.param("job");
  if (!deps_.jobs.table.find(job_id)) return arrays_.handle(call, *deps_.jobs.arrays.find(job_id), "logs", std::move(respond));
  log_routes_.handle_logs(call.req, job_id, std::move(respond));
}

void JobRoutes::lines(const Call& call, net::Respond respond) {
  const std::string& job_id = call.param("job");
  if (!deps_.jobs.table.find(job_id)) return arrays_.handle(call, *deps_.jobs.arrays.find(job_id), "lines", std::move(respond));
  log_routes_.handle_lines(call.req, job_id, std::move(respond));
}

void JobRoutes::usage(const Call& call, net::Respond respond) {
  const Job* job = deps_.jobs.table.find(call.param("job"));
  if (!job) return arrays_.handle(call, *deps_.jobs.arrays.find(call.param("job")), "usage", std::move(respond));
  json samples = json::array();
  for (const auto& u : deps_.gateway.job_usage().series(job->id, deps_.clock.now_ms())) {
    samples.push_back({{"time_ms", u.time_ms}, {"cpu_percent", u.cpu_percent}, {"memory_bytes", u.memory_bytes},
                       {"tasks", u.tasks}, {"gpus", u.gpus}, {"gpu_percent", u.gpu_percent},
                       {"gpu_memory_bytes", u.gpu_memory_bytes}});
  }
  respond(json_response(200, {{"job_id", job->id}, {"interval_ms", JobUsage::kBucketMs}, {"samples", samples}}));
}

void JobRoutes::wait(const Call& call, net::Respond respond) {
  const net::HttpRequest& req = call.req;
  const std::string job_id = call.param("job");
  if (!deps_.jobs.table.find(job_id)) return arrays_.handle(call, *deps_.jobs.arrays.find(job_id), "wait", std::move(respond));
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
  auto finish = [this, who = call.who, job_id, respond, weak]() {
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

}  // namespace ag::head
