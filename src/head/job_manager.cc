#include "head/job_manager.h"

#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "common/ids.h"
#include "head/job_codec.h"
#include "head/scheduler/scheduler.h"

namespace ag::head {
namespace {

using nlohmann::json;

std::string event_key(const std::string& job_id, size_t seq) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "/%08zu", seq);
  return job_id + buf;
}

const std::vector<JobEvent> kNoEvents;

// How many queued jobs (oldest first) one scheduling pass considers.
constexpr size_t kMaxJobsPerPass = 64;

// The kind of a pending reason: its first two words ("waiting behind", "waiting for",
// "cannot be", "no alive").
std::string reason_kind(const std::string& message) {
  size_t first = message.find(' ');
  size_t second = first == std::string::npos ? first : message.find(' ', first + 1);
  return message.substr(0, second);
}

}  // namespace

JobManager::JobManager(Deps deps, JobManagerConfig config)
    : deps_(deps), config_(config), next_port_(config.master_port_first) {}

JobManager::~JobManager() { *alive_ = false; }

Status JobManager::recover() {
  auto jobs = deps_.store.scan(store::kJobsTable);
  if (!jobs.ok()) return jobs.error();
  for (const auto& [key, value] : jobs.value()) {
    auto doc = json::parse(value, nullptr, false);
    auto job = job_from_json(doc);
    if (!job.ok()) {
      spdlog::error("skipping stored job {}: {}", key, job.error().message);
      continue;
    }
    next_seq_ = std::max(next_seq_, job->queue_seq + 1);
    if (!job->spec.submission_id.empty()) submission_ids_[job->spec.submission_id] = job->id;
    jobs_[job->id] = std::move(job.value());
  }
  auto events = deps_.store.scan(store::kEventsTable);
  if (!events.ok()) return events.error();
  for (const auto& [key, value] : events.value()) {
    auto event = event_from_json(json::parse(value, nullptr, false));
    if (!event.ok()) continue;
    events_[key.substr(0, key.find('/'))].push_back(std::move(event.value()));
  }
  int64_t steady = deps_.clock.steady_ms();
  for (auto& [id, job] : jobs_) {
    if (job.state == JobState::kPending) {
      pending_[job.queue_seq] = id;
    } else if (job.state == JobState::kRunning && job.current_attempt()) {
      AttemptRecord& attempt = *job.current_attempt();
      active_.insert(id);
      ports_in_use_.insert(attempt.master_port);
      // The nodes of a running attempt get until the node timeout to reconnect and
      // report; the registry's expiry declares them lost otherwise.
      for (const auto& task : attempt.tasks) {
        if (task.terminal() || deps_.nodes.find(task.node_id)) continue;
        Node placeholder;
        placeholder.node_id = task.node_id;
        placeholder.address = task.node_address;
        placeholder.state = NodeState::kDisconnected;
        placeholder.last_heartbeat_steady_ms = steady;
        deps_.nodes.upsert(std::move(placeholder));
      }
      arm_timeout(job);
    }
  }
  spdlog::info("recovered {} jobs ({} pending, {} running) from the store", jobs_.size(),
               pending_.size(), active_.size());
  request_schedule();
  return {};
}

void JobManager::submit(api::JobSpec spec, std::function<void(Result<std::string>)> done) {
  std::vector<api::JobSpec> specs;
  specs.push_back(std::move(spec));
  submit_all(std::move(specs), [done](Result<std::vector<std::string>> ids) {
    if (!ids.ok()) return done(ids.error());
    done(ids.value().front());
  });
}

void JobManager::submit_all(std::vector<api::JobSpec> specs,
                            std::function<void(Result<std::vector<std::string>>)> done) {
  struct Accepted {
    Job job;
    JobEvent event;
  };
  auto accepted = std::make_shared<std::vector<Accepted>>();
  std::vector<std::string> ids;
  std::vector<std::string> reserved_submission_ids;
  std::vector<store::Mutation> batch;
  int64_t now = deps_.clock.now_ms();
  for (auto& spec : specs) {
    // A retried submit (same client-chosen id) returns the job it created before.
    if (!spec.submission_id.empty()) {
      auto it = submission_ids_.find(spec.submission_id);
      if (it != submission_ids_.end()) {
        ids.push_back(it->second);
        continue;
      }
    }
    Job job;
    job.id = new_job_id();
    job.spec = std::move(spec);
    job.submitted_ms = now;
    job.queue_seq = next_seq_++;
    JobEvent event{now, "submitted: " + std::to_string(job.spec.num_workers) +
                            " task(s), entrypoint: " + job.spec.entrypoint};
    batch.push_back({store::kJobsTable, job.id, job_to_json(job).dump()});
    batch.push_back({store::kEventsTable, event_key(job.id, 0), event_to_json(event).dump()});
    if (!job.spec.submission_id.empty()) {
      submission_ids_[job.spec.submission_id] = job.id;
      reserved_submission_ids.push_back(job.spec.submission_id);
    }
    ids.push_back(job.id);
    accepted->push_back({std::move(job), event});
  }
  if (accepted->empty()) return done(ids);
  auto alive = alive_;
  // The jobs become visible only once durable: acknowledging first could lose them.
  deps_.store.write(std::move(batch), [this, alive, accepted, ids, done, reserved_submission_ids](Status status) {
    boost::asio::post(deps_.io, [this, alive, accepted, ids, done, status, reserved_submission_ids] {
      if (!*alive) return;
      if (!status) {
        for (const auto& sid : reserved_submission_ids) submission_ids_.erase(sid);
        done(status.error());
        return;
      }
      for (auto& a : *accepted) {
        std::string id = a.job.id;
        events_[id].push_back(a.event);
        pending_[a.job.queue_seq] = id;
        jobs_[id] = std::move(a.job);
        for (const auto& observer : observers_) observer(jobs_[id]);
      }
      done(ids);
      request_schedule();
    });
  });
}

const Job* JobManager::find(const std::string& job_id) const {
  auto it = jobs_.find(job_id);
  return it == jobs_.end() ? nullptr : &it->second;
}

std::vector<const Job*> JobManager::list() const {
  std::vector<const Job*> out;
  out.reserve(jobs_.size());
  for (const auto& [_, job] : jobs_) out.push_back(&job);
  std::sort(out.begin(), out.end(), [](const Job* a, const Job* b) { return a->queue_seq > b->queue_seq; });
  return out;
}

const std::vector<JobEvent>& JobManager::events(const std::string& job_id) const {
  auto it = events_.find(job_id);
  return it == events_.end() ? kNoEvents : it->second;
}

std::map<std::string, Resources> JobManager::allocations() const {
  std::map<std::string, Resources> out;
  for (const auto& id : active_) {
    const Job& job = jobs_.at(id);
    const AttemptRecord* attempt = job.current_attempt();
    if (!attempt) continue;
    for (const auto& task : attempt->tasks) {
      if (!task.terminal()) out[task.node_id] += job.spec.per_task();
    }
  }
  return out;
}

void JobManager::report_problem(const std::string& job_id, const std::string& message) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;
  std::vector<JobEvent> added;
  add_event(it->second, message, added);
  persist(it->second, added);
}

std::map<JobState, int> JobManager::count_by_state() const {
  std::map<JobState, int> counts;
  for (const auto& [_, job] : jobs_) counts[job.state]++;
  return counts;
}

Status JobManager::stop(const std::string& job_id) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return not_found("no job with id '" + job_id + "'; list jobs with `ag list-jobs`");
  Job& job = it->second;
  if (job.terminal()) {
    return Error{ErrorCode::kConflict, "job " + job_id + " already finished (" + to_string(job.state) + ")"};
  }
  apply(job, on_stop_requested(job, deps_.clock.now_ms()));
  return {};
}

uint64_t JobManager::watch(const std::string& job_id, std::function<void()> changed) {
  const Job* job = find(job_id);
  if (!job || job->terminal()) {
    changed();
    return 0;
  }
  uint64_t id = next_waiter_++;
  waiters_[id] = Waiter{job_id, std::move(changed)};
  return id;
}

void JobManager::cancel_watch(uint64_t id) { waiters_.erase(id); }

void JobManager::notify_waiters(const std::string& job_id) {
  std::vector<std::function<void()>> ready;
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (it->second.job_id == job_id) {
      ready.push_back(std::move(it->second.ready));
      it = waiters_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& fn : ready) fn();
}

void JobManager::on_node_registered(const std::string& node_id, const std::vector<ReportedTask>& running,
                                    const std::vector<ReportedTask>& ended) {
  // Adopt what the worker still runs for live attempts; kill what the head gave up on.
  std::set<std::tuple<std::string, int, int>> reported;
  for (const auto& r : running) {
    reported.insert({r.job_id, r.attempt, r.task_index});
    auto it = jobs_.find(r.job_id);
    const AttemptRecord* attempt = it == jobs_.end() ? nullptr : it->second.current_attempt();
    bool wanted = attempt && attempt->number == r.attempt && !attempt->finished() &&
                  r.task_index < static_cast<int>(attempt->tasks.size()) &&
                  !attempt->tasks[r.task_index].terminal() && !attempt->ending;
    if (!wanted) {
      json msg = {{"type", "kill"}, {"job_id", r.job_id}, {"attempt", r.attempt},
                  {"task_index", r.task_index}, {"grace_ms", config_.kill_grace_ms}};
      deps_.nodes.send(node_id, msg.dump());
      continue;
    }
    if (attempt->tasks[r.task_index].state == TaskState::kStarting) {
      on_task_started(r.job_id, r.attempt, r.task_index, r.pid);
    }
  }
  for (const auto& r : ended) reported.insert({r.job_id, r.attempt, r.task_index});
  // Tasks the head placed here that the worker neither runs nor reported as ended
  // (their launch was lost with an old channel, or the worker restarted) are gone.
  const Node* node = deps_.nodes.find(node_id);
  std::string label = node ? node->label() : node_id;
  std::vector<std::pair<std::string, TaskRef>> lost;
  for (const auto& id : active_) {
    const AttemptRecord* attempt = jobs_[id].current_attempt();
    if (!attempt) continue;
    for (const auto& task : attempt->tasks) {
      if (task.node_id != node_id || task.terminal()) continue;
      if (reported.count({id, attempt->number, task.index})) continue;
      TaskRef ref{attempt->number, task.index, node_id};
      if (task.state == TaskState::kStarting && !attempt->ending) {
        // Never reported as started: its launch went down with an old channel (or a
        // head that crashed right after placing it). Nothing ran, so send it again.
        send_launch(jobs_[id], ref);
        continue;
      }
      lost.push_back({id, ref});
    }
  }
  for (const auto& [job_id, ref] : lost) {
    TaskExit exit;
    exit.lost = "node " + label + " reconnected without it";
    on_task_exited(job_id, ref.attempt, ref.task_index, exit);
  }
  request_schedule();
}

void JobManager::on_task_started(const std::string& job_id, int attempt, int task_index, int64_t pid) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;
  apply(it->second, head::on_task_started(it->second, attempt, task_index, pid, deps_.clock.now_ms()));
}

void JobManager::on_task_exited(const std::string& job_id, int attempt, int task_index, const TaskExit& exit) {
  deps_.logs.close({job_id, attempt, task_index});
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;
  apply(it->second, head::on_task_exited(it->second, attempt, task_index, exit, deps_.clock.now_ms()));
}

void JobManager::on_node_dead(const std::string& node_id) {
  const Node* node = deps_.nodes.find(node_id);
  std::string label = node ? node->label() : node_id;
  std::vector<std::string> affected(active_.begin(), active_.end());
  for (const auto& id : affected) {
    Job& job = jobs_[id];
    Effects fx = on_node_lost(job, node_id, label, deps_.clock.now_ms());
    for (const auto* attempt = job.current_attempt(); attempt;) {
      for (const auto& task : attempt->tasks) {
        if (task.node_id == node_id) deps_.logs.close({id, attempt->number, task.index});
      }
      break;
    }
    apply(job, std::move(fx));
  }
  request_schedule();
}

void JobManager::request_schedule() {
  if (schedule_posted_) return;
  schedule_posted_ = true;
  auto alive = alive_;
  boost::asio::post(deps_.io, [this, alive] {
    if (!*alive) return;
    schedule_posted_ = false;
    run_schedule();
  });
}

void JobManager::run_schedule() {
  if (pending_.empty()) return;
  // Build the snapshot: capacity minus what live tasks hold.
  std::map<std::string, sched::NodeView> views;
  for (const auto& [id, node] : deps_.nodes.nodes()) {
    sched::NodeView v;
    v.node_id = id;
    v.total = node.total;
    v.free = node.total;
    v.free_gpu_ids = node.gpu_ids;
    v.schedulable = node.state == NodeState::kAlive;
    views[id] = std::move(v);
  }
  for (const auto& id : active_) {
    const Job& job = jobs_[id];
    const AttemptRecord* attempt = job.current_attempt();
    if (!attempt) continue;
    Resources per_task = job.spec.per_task();
    for (const auto& task : attempt->tasks) {
      if (task.terminal()) continue;
      auto v = views.find(task.node_id);
      if (v == views.end()) continue;
      v->second.free -= per_task;
      auto& ids = v->second.free_gpu_ids;
      for (int g : task.gpu_ids) ids.erase(std::remove(ids.begin(), ids.end(), g), ids.end());
    }
  }
  std::vector<sched::NodeView> nodes;
  nodes.reserve(views.size());
  for (auto& [_, v] : views) {
    v.free.cpu_millis = std::max<int64_t>(0, v.free.cpu_millis);
    v.free.memory_bytes = std::max<int64_t>(0, v.free.memory_bytes);
    v.free.gpus = static_cast<int64_t>(v.free_gpu_ids.size());
    nodes.push_back(std::move(v));
  }
  std::vector<sched::PendingJob> queue;
  // One pass looks at the oldest jobs only: a pass runs after every event that frees
  // capacity, and walking a queue of thousands each time would cost more than it
  // places. Jobs further back move into the window as those ahead are placed.
  queue.reserve(std::min(pending_.size(), kMaxJobsPerPass));
  for (const auto& [_, id] : pending_) {
    if (queue.size() >= kMaxJobsPerPass) break;
    const Job& job = jobs_.at(id);
    queue.push_back({id, job.spec.num_workers, job.spec.per_task(),
                     job.spec.placement == "spread" ? sched::PlacementPolicy::kSpread
                                                    : sched::PlacementPolicy::kPack});
  }
  sched::Plan plan = sched::schedule(nodes, queue);

  for (const auto& placement : plan.placements) {
    Job& job = jobs_[placement.job_id];
    std::vector<PlacedTask> tasks;
    for (const auto& t : placement.tasks) {
      const Node* node = deps_.nodes.find(t.node_id);
      tasks.push_back({t.node_id, node ? node->address : "", t.gpu_ids});
    }
    pending_.erase(job.queue_seq);
    active_.insert(job.id);
    int port = allocate_master_port(tasks.empty() ? "" : tasks.front().node_id);
    apply(job, on_placed(job, tasks, port, deps_.clock.now_ms()));
    arm_timeout(job);
  }
  for (const auto& reason : plan.pending) {
    Job& job = jobs_[reason.job_id];
    std::string message = (reason.infeasible ? "cannot be placed: " : "") + reason.reason;
    if (job.message == message) continue;
    // The reason is shown as it is now, but it is derived state: it is only logged (and
    // written) when its kind changes, not each time the job ahead of it is another one.
    // Otherwise a long queue would rewrite every pending job on every placement.
    bool new_kind = reason_kind(job.message) != reason_kind(message);
    job.message = message;
    if (!new_kind) continue;
    std::vector<JobEvent> added;
    add_event(job, "pending: " + message, added);
    persist(job, added);
  }
}

void JobManager::add_event(Job& job, const std::string& message, std::vector<JobEvent>& out) {
  JobEvent event{deps_.clock.now_ms(), message};
  events_[job.id].push_back(event);
  out.push_back(event);
}

void JobManager::persist(const Job& job, const std::vector<JobEvent>& new_events) {
  std::vector<store::Mutation> batch;
  batch.push_back({store::kJobsTable, job.id, job_to_json(job).dump()});
  size_t total = events_[job.id].size();
  for (size_t i = 0; i < new_events.size(); ++i) {
    batch.push_back({store::kEventsTable, event_key(job.id, total - new_events.size() + i),
                     event_to_json(new_events[i]).dump()});
  }
  std::string id = job.id;
  deps_.store.write(std::move(batch), [id](Status status) {
    if (!status) spdlog::error("could not persist job {}: {}", id, status.error().message);
  });
}

void JobManager::apply(Job& job, Effects fx) {
  std::vector<JobEvent> added;
  for (const auto& e : fx.events) add_event(job, e, added);
  if (fx.changed || !added.empty()) persist(job, added);
  for (const auto& ref : fx.launch) send_launch(job, ref);
  for (const auto& ref : fx.kill) send_kill(job, ref);
  const AttemptRecord* attempt = job.current_attempt();
  if (fx.requeue || fx.finished) {
    if (attempt) release_master_port(attempt->master_port);
    active_.erase(job.id);
  }
  if (fx.requeue) pending_[job.queue_seq] = job.id;
  if (fx.finished) {
    pending_.erase(job.queue_seq);
    timeouts_.erase(job.id);
  }
  if (fx.changed || fx.finished) {
    notify_waiters(job.id);
    for (const auto& observer : observers_) observer(job);
  }
  // Any task that ended freed capacity: let queued jobs have it now.
  if (fx.changed && !pending_.empty()) request_schedule();
}

void JobManager::send_launch(const Job& job, const TaskRef& ref) {
  const AttemptRecord& attempt = job.attempts[ref.attempt];
  const TaskRecord& task = attempt.tasks[ref.task_index];
  int local_rank = 0, local_world = 0;
  for (const auto& other : attempt.tasks) {
    if (other.node_id != task.node_id) continue;
    if (other.index < task.index) ++local_rank;
    ++local_world;
  }
  std::string gpus;
  for (size_t i = 0; i < task.gpu_ids.size(); ++i) gpus += (i ? "," : "") + std::to_string(task.gpu_ids[i]);
  std::string world = std::to_string(job.spec.num_workers);
  std::string port = std::to_string(attempt.master_port);
  json env = {
      {"AG_JOB_ID", job.id}, {"AG_ATTEMPT", std::to_string(attempt.number)},
      {"AG_TASK_INDEX", std::to_string(task.index)}, {"AG_WORKER_NUM", world},
      {"AG_MASTER_ADDR", attempt.master_addr}, {"AG_MASTER_PORT", port},
      {"AG_NODE_ID", task.node_id}, {"AG_NODE_IP", task.node_address},
      {"RANK", std::to_string(task.index)}, {"WORLD_SIZE", world},
      {"LOCAL_RANK", std::to_string(local_rank)}, {"LOCAL_WORLD_SIZE", std::to_string(local_world)},
      {"MASTER_ADDR", attempt.master_addr}, {"MASTER_PORT", port},
      {"CUDA_VISIBLE_DEVICES", gpus}};
  json msg = {{"type", "launch"}, {"job_id", job.id}, {"attempt", attempt.number},
              {"task_index", task.index}, {"entrypoint", job.spec.entrypoint},
              {"env", env}, {"env_vars", job.spec.runtime_env.env_vars}, {"gpu_ids", task.gpu_ids},
              {"working_dir_hash", job.spec.runtime_env.working_dir_hash()},
              {"python_executable", job.spec.runtime_env.python_executable}};
  if (!deps_.nodes.send(ref.node_id, msg.dump())) {
    // The node went away between placement and launch: the task never started.
    auto alive = alive_;
    std::string job_id = job.id;
    boost::asio::post(deps_.io, [this, alive, job_id, ref] {
      if (!*alive) return;
      on_task_exited(job_id, ref.attempt, ref.task_index, TaskExit{{}, {}, "its node is not connected"});
    });
  }
}

void JobManager::send_kill(const Job& job, const TaskRef& ref) {
  json msg = {{"type", "kill"}, {"job_id", job.id}, {"attempt", ref.attempt},
              {"task_index", ref.task_index}, {"grace_ms", config_.kill_grace_ms}};
  // An unreachable node is told again when it re-registers (its report lists the
  // task and the head answers with a kill), or its tasks die with it.
  deps_.nodes.send(ref.node_id, msg.dump());
}

int JobManager::allocate_master_port(const std::string& node_id) {
  const Node* node = deps_.nodes.find(node_id);
  int range = config_.master_port_last - config_.master_port_first + 1;
  for (int i = 0; i < range; ++i) {
    int port = next_port_;
    next_port_ = next_port_ >= config_.master_port_last ? config_.master_port_first : next_port_ + 1;
    if (!ports_in_use_.count(port) && !(node && node->busy_ports.count(port))) {
      ports_in_use_.insert(port);
      return port;
    }
  }
  // More live attempts than ports: share the oldest rather than refuse to run.
  return config_.master_port_first;
}

void JobManager::release_master_port(int port) { ports_in_use_.erase(port); }

void JobManager::arm_timeout(Job& job) {
  if (!job.spec.timeout_s || job.terminal()) return;
  // A job's timeout covers its whole run, retries and the waits between them
  // included; with timeout_per_attempt it starts again with each attempt.
  const AttemptRecord* attempt = job.current_attempt();
  int64_t start_ms = job.spec.timeout_per_attempt && attempt ? attempt->started_ms : job.started_ms;
  if (timeouts_.count(job.id) && !job.spec.timeout_per_attempt) return;
  int64_t deadline_ms = start_ms + static_cast<int64_t>(*job.spec.timeout_s * 1000);
  int64_t remaining = std::max<int64_t>(0, deadline_ms - deps_.clock.now_ms());
  auto timer = std::make_unique<boost::asio::steady_timer>(deps_.io, std::chrono::milliseconds(remaining));
  auto alive = alive_;
  std::string id = job.id;
  int attempt_number = attempt ? attempt->number : 0;
  timer->async_wait([this, alive, id, attempt_number](const boost::system::error_code& ec) {
    if (ec || !*alive) return;
    auto it = jobs_.find(id);
    if (it == jobs_.end()) return;
    Job& timed_out = it->second;
    // A per-attempt timer belongs to its attempt only.
    const AttemptRecord* current = timed_out.current_attempt();
    if (timed_out.spec.timeout_per_attempt && (!current || current->number != attempt_number || current->finished())) {
      return;
    }
    apply(timed_out, on_timed_out(timed_out, deps_.clock.now_ms()));
  });
  timeouts_[job.id] = std::move(timer);  // replaces (and so cancels) an earlier attempt's timer
}

}  // namespace ag::head
