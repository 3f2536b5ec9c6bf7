#include "head/dashboard/metrics.h"

#include <algorithm>
#include <charconv>

namespace ag::head::dashboard {
namespace {

// Latency buckets, in seconds: a job that starts at once takes milliseconds; one that
// waits for capacity may take minutes.
const std::vector<double> kLatencyBounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                            0.5,   1,      2.5,   5,    10,    30,   60,  300};

std::string number(double value) {
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
  return ec == std::errc() ? std::string(buffer, end) : "NaN";
}

void header(std::string& out, const char* name, const char* type, const char* help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

void sample(std::string& out, const std::string& name, const std::string& labels, double value) {
  out += name;
  if (!labels.empty()) out += "{" + labels + "}";
  out += ' ';
  out += number(value);
  out += '\n';
}

// Label values here come from fixed sets (states, route templates, methods), but are
// escaped all the same so that no input can break the format.
std::string label_value(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

bool is_known_method(const std::string& method) {
  for (const char* m : {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}) {
    if (method == m) return true;
  }
  return false;
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : upper_bounds_(std::move(upper_bounds)), bucket_counts_(upper_bounds_.size(), 0) {}

void Histogram::observe(double value) {
  for (size_t i = 0; i < upper_bounds_.size(); ++i) {
    if (value <= upper_bounds_[i]) {
      ++bucket_counts_[i];
      break;
    }
  }
  sum_ += value;
  ++count_;
}

void Histogram::render(const std::string& name, std::string& out) const {
  render_histogram(name, upper_bounds_, bucket_counts_, sum_, count_, out);
}

void render_histogram(const std::string& name, const std::vector<double>& upper_bounds,
                      const std::vector<uint64_t>& counts, double sum, uint64_t count, std::string& out) {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < upper_bounds.size(); ++i) {
    cumulative += counts[i];
    sample(out, name + "_bucket", "le=\"" + number(upper_bounds[i]) + "\"", static_cast<double>(cumulative));
  }
  sample(out, name + "_bucket", "le=\"+Inf\"", static_cast<double>(count));
  sample(out, name + "_sum", "", sum);
  sample(out, name + "_count", "", static_cast<double>(count));
}

std::string route_template(const std::string& path) {
  static const char* kFixed[] = {
      "/",          "/index.html", "/login",          "/metrics",      "/favicon.ico", "/api/healthz", "/api/cluster",
      "/api/nodes", "/api/jobs",   "/api/jobs/batch", "/api/packages", "/api/session", "/api/stream",  "/api/workers"};
  for (const char* fixed : kFixed) {
    if (path == fixed) return path;
  }
  auto starts = [&](const char* prefix) { return path.rfind(prefix, 0) == 0; };
  if (starts("/assets/")) return "/assets/{file}";
  if (starts("/api/packages/")) return "/api/packages/{hash}";
  if (starts("/api/nodes/") && path.find('/', 11) == std::string::npos) return "/api/nodes/{id}";
  if (starts("/api/jobs/")) {
    size_t slash = path.find('/', 10);
    if (slash == std::string::npos) return "/api/jobs/{id}";
    std::string action = path.substr(slash + 1);
    for (const char* known : {"events", "logs", "wait", "stop"}) {
      if (action == known) return "/api/jobs/{id}/" + action;
    }
  }
  return "other";
}

Metrics::Metrics(Deps deps) : deps_(deps), scheduling_latency_(kLatencyBounds), start_latency_(kLatencyBounds) {}

void Metrics::on_job_removed(const std::string& job_id) { recorded_.erase(job_id); }

void Metrics::on_event(const ClusterEvent& event) {
  if (event.type == "job.succeeded") ++finished_["SUCCEEDED"];
  if (event.type == "job.failed") ++finished_["FAILED"];
  if (event.type == "job.stopped") ++finished_["STOPPED"];
}

void Metrics::on_job_changed(const Job& job) {
  // Latencies come from the job's own timestamps, not the time of observation: a job
  // may be placed, start and even finish between two observations.
  uint8_t& recorded = recorded_[job.id];
  if (!job.attempts.empty()) {
    const AttemptRecord& first = job.attempts.front();
    if (!(recorded & 1)) {
      scheduling_latency_.observe(std::max<int64_t>(0, first.started_ms - job.submitted_ms) / 1000.0);
      recorded |= 1;
    }
    if (!(recorded & 2)) {
      int64_t all_running_ms = 0;
      bool all_started = !first.tasks.empty();
      for (const auto& task : first.tasks) {
        if (task.started_ms == 0) all_started = false;
        all_running_ms = std::max(all_running_ms, task.started_ms);
      }
      if (all_started) {
        start_latency_.observe(std::max<int64_t>(0, all_running_ms - job.submitted_ms) / 1000.0);
        recorded |= 2;
      }
    }
  }
  if (job.terminal()) recorded_.erase(job.id);
}

net::Respond Metrics::count_request(const net::HttpRequest& request, net::Respond respond) {
  std::string route = route_template(request.path);
  std::string method = is_known_method(request.method) ? request.method : "other";
  return [this, route = std::move(route), method = std::move(method),
          respond = std::move(respond)](net::HttpResponse response) {
    ++requests_[{route, method, response.status}];
    respond(std::move(response));
  };
}

std::string Metrics::render() const {
  std::string out;
  out.reserve(8192);

  std::map<NodeState, int> nodes_by_state = {
      {NodeState::kAlive, 0}, {NodeState::kDisconnected, 0}, {NodeState::kDead, 0}};
  auto allocations = deps_.jobs.table.allocations();
  Resources capacity, allocated;
  for (const auto& [id, node] : deps_.nodes.nodes()) {
    ++nodes_by_state[node.state];
    // As in GET /api/cluster: capacity and allocation of the nodes that are alive.
    if (node.state == NodeState::kAlive) {
      capacity += node.total;
      if (auto it = allocations.find(id); it != allocations.end()) allocated += it->second;
    }
  }
  header(out, "ag_nodes", "gauge", "Worker nodes the head knows, by state.");
  for (const auto& [state, n] : nodes_by_state)
    sample(out, "ag_nodes", std::string("state=\"") + to_string(state) + "\"", n);
  // Node health: which alive nodes take no new tasks because a check or a GPU failed.
  int unhealthy = 0;
  std::string unhealthy_samples;
  for (const auto& [id, node] : deps_.nodes.nodes()) {
    if (node.state != NodeState::kAlive || !node.unhealthy) continue;
    ++unhealthy;
    sample(unhealthy_samples, "ag_node_unhealthy",
           "node=\"" + label_value(id) + "\",reason=\"" + label_value(node.unhealthy->reason.substr(0, 120)) + "\"", 1);
  }
  header(out, "ag_nodes_unhealthy", "gauge", "Alive nodes a health check or GPU error marked UNHEALTHY.");
  sample(out, "ag_nodes_unhealthy", "", unhealthy);
  header(out, "ag_node_unhealthy", "gauge", "1 for each UNHEALTHY alive node, with why (its first 120 characters).");
  out += unhealthy_samples;
  header(out, "ag_gpu_errors_total", "counter", "GPU errors nodes reported (XID, ECC, retired pages, row remaps, vanished).");
  for (const auto& [key, n] : deps_.nodes.gpu_errors()) {
    sample(out, "ag_gpu_errors_total",
           "node=\"" + label_value(key.node_id) + "\",gpu=\"" + std::to_string(key.gpu) + "\",kind=\"" +
               label_value(key.kind) + "\"",
           static_cast<double>(n));
  }
  header(out, "ag_jobs_finished_total", "counter", "Jobs that ended since the head started, by how.");
  for (const auto& [state, n] : finished_) sample(out, "ag_jobs_finished_total", "state=\"" + state + "\"", static_cast<double>(n));

  std::map<JobState, int> jobs_by_state;
  for (auto s : {JobState::kPending, JobState::kRunning, JobState::kSucceeded, JobState::kFailed, JobState::kStopped}) {
    jobs_by_state[s] = 0;
  }
  for (const auto& [state, n] : deps_.jobs.table.count_by_state()) jobs_by_state[state] = n;
  header(out, "ag_jobs", "gauge", "Jobs in the head's store, by state.");
  for (const auto& [state, n] : jobs_by_state)
    sample(out, "ag_jobs", std::string("state=\"") + to_string(state) + "\"", n);

  int tasks_running = 0;
  // Live jobs by owner: who is using the cluster now (user names are [a-z0-9_-]).
  std::map<std::pair<std::string, JobState>, int> live_by_owner;
  for (const Job* job : deps_.jobs.table.list()) {
    if (job->terminal()) continue;
    ++live_by_owner[{job->owner, job->state}];
    if (const AttemptRecord* attempt = job->current_attempt()) {
      for (const auto& task : attempt->tasks) tasks_running += task.state == TaskState::kRunning;
    }
  }
  header(out, "ag_jobs_live", "gauge", "PENDING and RUNNING jobs, by owner and state.");
  for (const auto& [key, n] : live_by_owner) {
    sample(out, "ag_jobs_live", "owner=\"" + key.first + "\",state=\"" + to_string(key.second) + "\"", n);
  }
  // Jobs pending long, with what they wait for: the oldest kMaxPendingSeries of those
  // waiting kPendingLongS or more (list() is newest first).
  constexpr int64_t kPendingLongS = 600;
  constexpr size_t kMaxPendingSeries = 100;
  const int64_t now_ms = deps_.jobs.deps.clock.now_ms();
  std::vector<const Job*> waiting_long;
  for (const Job* job : deps_.jobs.table.list()) {
    if (job->state == JobState::kPending && now_ms - job->submitted_ms >= kPendingLongS * 1000) waiting_long.push_back(job);
  }
  header(out, "ag_job_pending_seconds", "gauge",
         "How long each job pending 10 minutes or more has waited (the 100 oldest), with what it waits for.");
  for (size_t i = waiting_long.size() > kMaxPendingSeries ? waiting_long.size() - kMaxPendingSeries : 0;
       i < waiting_long.size(); ++i) {
    const Job& job = *waiting_long[i];
    sample(out, "ag_job_pending_seconds",
           "job_id=\"" + label_value(job.id) + "\",owner=\"" + label_value(job.owner) + "\",queue=\"" +
               label_value(job.spec.queue) + "\",reason=\"" +
               (job.pending_kind ? sched::to_string(*job.pending_kind) : "queued") + "\"",
           static_cast<double>(now_ms - job.submitted_ms) / 1000.0);
  }
  // The sharing policy by user: what their running jobs hold (against their quotas) and
  // their fair-share usage.
  const auto use = deps_.jobs.table.use_by_owner();
  header(out, "ag_user_gpus_held", "gauge", "GPUs the user's running jobs hold.");
  for (const auto& [user, held] : use) sample(out, "ag_user_gpus_held", "user=\"" + user + "\"", static_cast<double>(held.held.gpus));
  header(out, "ag_user_cpus_held", "gauge", "CPUs the user's running jobs hold.");
  for (const auto& [user, held] : use) sample(out, "ag_user_cpus_held", "user=\"" + user + "\"", held.held.cpu_millis / 1000.0);
  header(out, "ag_user_usage_gpu_seconds", "gauge",
         "The user's fair-share usage: GPU-equivalent seconds (a CPU counts 1/16), decayed by the half-life.");
  for (const auto& line : share_report(deps_.jobs)) sample(out, "ag_user_usage_gpu_seconds", "user=\"" + line.user + "\"", line.usage);
  // Per queue: its depth and what its running jobs hold.
  std::map<std::string, std::pair<int, int>> queue_jobs;  // queue -> (pending, running)
  for (const auto& [name, _] : deps_.jobs.policy.queues()) queue_jobs[name];
  for (const Job* job : deps_.jobs.table.list()) {
    if (job->spec.queue.empty() || job->terminal()) continue;
    auto& [pending, running] = queue_jobs[job->spec.queue];
    pending += job->state == JobState::kPending;
    running += job->state == JobState::kRunning;
  }
  std::map<std::string, sched::Use> queue_use;
  for (const auto& [queue_user, held] : deps_.jobs.table.use_by_queue()) queue_use[queue_user.first] += held;
  header(out, "ag_queue_pending_jobs", "gauge", "PENDING jobs in the queue.");
  for (const auto& [name, n] : queue_jobs) sample(out, "ag_queue_pending_jobs", "queue=\"" + name + "\"", n.first);
  header(out, "ag_queue_running_jobs", "gauge", "RUNNING jobs of the queue.");
  for (const auto& [name, n] : queue_jobs) sample(out, "ag_queue_running_jobs", "queue=\"" + name + "\"", n.second);
  header(out, "ag_queue_gpus_held", "gauge", "GPUs the queue's running jobs hold.");
  for (const auto& [name, _] : queue_jobs) {
    sample(out, "ag_queue_gpus_held", "queue=\"" + name + "\"", static_cast<double>(queue_use[name].held.gpus));
  }
  header(out, "ag_queue_cpus_held", "gauge", "CPUs the queue's running jobs hold.");
  for (const auto& [name, _] : queue_jobs) {
    sample(out, "ag_queue_cpus_held", "queue=\"" + name + "\"", queue_use[name].held.cpu_millis / 1000.0);
  }
  header(out, "ag_tasks_running", "gauge", "Tasks whose process is running now.");
  sample(out, "ag_tasks_running", "", tasks_running);

  header(out, "ag_cpus_capacity", "gauge", "CPUs of alive nodes.");
  sample(out, "ag_cpus_capacity", "", capacity.cpu_millis / 1000.0);
  header(out, "ag_cpus_allocated", "gauge", "CPUs held by live tasks on alive nodes.");
  sample(out, "ag_cpus_allocated", "", allocated.cpu_millis / 1000.0);
  header(out, "ag_gpus_capacity", "gauge", "GPUs of alive nodes.");
  sample(out, "ag_gpus_capacity", "", static_cast<double>(capacity.gpus));
  header(out, "ag_gpus_allocated", "gauge", "GPUs held by live tasks on alive nodes.");
  sample(out, "ag_gpus_allocated", "", static_cast<double>(allocated.gpus));
  header(out, "ag_memory_capacity_bytes", "gauge", "Memory of alive nodes.");
  sample(out, "ag_memory_capacity_bytes", "", static_cast<double>(capacity.memory_bytes));
  header(out, "ag_memory_allocated_bytes", "gauge", "Memory held by live tasks on alive nodes.");
  sample(out, "ag_memory_allocated_bytes", "", static_cast<double>(allocated.memory_bytes));

  header(out, "ag_head_leader", "gauge", "1: this head leads the cluster (a standby answers no /metrics).");
  sample(out, "ag_head_leader", "", 1);
  header(out, "ag_head_epoch", "gauge", "The epoch of this head's lease (0 for a lone head on SQLite).");
  sample(out, "ag_head_epoch", "", static_cast<double>(deps_.role.epoch));
  header(out, "ag_store_write_seconds", "histogram", "How long the store's write transactions took.");
  const store::CommitTimes times = deps_.store.commit_times();
  render_histogram("ag_store_write_seconds", times.upper_bounds, times.counts, times.sum_s, times.count, out);

  header(out, "ag_scheduling_latency_seconds", "histogram",
         "Time from a job's submission to the placement of its first attempt.");
  scheduling_latency_.render("ag_scheduling_latency_seconds", out);
  header(out, "ag_job_start_latency_seconds", "histogram",
         "Time from a job's submission to every task of its first attempt running.");
  start_latency_.render("ag_job_start_latency_seconds", out);

  header(out, "ag_api_requests_total", "counter",
         "HTTP requests answered by the head, by route, method and status code.");
  for (const auto& [key, n] : requests_) {
    const auto& [route, method, code] = key;
    sample(out, "ag_api_requests_total",
           "route=\"" + label_value(route) + "\",method=\"" + method + "\",code=\"" + std::to_string(code) + "\"",
           static_cast<double>(n));
  }

  header(out, "ag_log_ingested_bytes_total", "counter",
         "Task output bytes the head received from workers since it started.");
  sample(out, "ag_log_ingested_bytes_total", "", static_cast<double>(deps_.logs.bytes_ingested()));
  for (const auto& render : renderers_) render(out);
  return out;
}

}  // namespace ag::head::dashboard
