#include "head/jobs/job_table.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "head/jobs/job_codec.h"

namespace ag::head {
namespace {

const std::vector<JobEvent> kNoEvents;

std::string submission_key(const std::string& owner, const std::string& submission_id) {
  return owner + "\n" + submission_id;
}

}  // namespace

Result<std::vector<std::string>> JobTable::load(store::KvStore& store, int64_t now_ms) {
  std::vector<std::string> salvaged;
  auto jobs = store.scan(store::kJobsTable);
  if (!jobs.ok()) return jobs.error();
  for (const auto& [key, value] : jobs.value()) {
    auto doc = nlohmann::json::parse(value, nullptr, false);
    auto job = job_from_json(doc);
    if (!job.ok()) {
      // An accepted job is never dropped: kept as FAILED, saying why, when it can be.
      auto kept = salvage_job(doc, job.error().message, now_ms);
      if (!kept) {
        spdlog::error("skipping stored job {}: {}", key, job.error().message);
        continue;
      }
      spdlog::error("stored job {} could not be loaded ({}): kept as FAILED", key, job.error().message);
      salvaged.push_back(kept->id);
      job = std::move(*kept);
    }
    next_seq_ = std::max(next_seq_, job->queue_seq + 1);
    if (!job->spec.submission_id.empty()) {
      submission_ids_[submission_key(job->owner, job->spec.submission_id)] = job->id;
    }
    Job& loaded = jobs_[job->id] = std::move(job.value());
    by_id_[loaded.id] = &loaded;
    newest_.emplace(loaded.queue_seq, &loaded);
    recount(loaded);
  }
  auto events = store.scan(store::kEventsTable);
  if (!events.ok()) return events.error();
  for (const auto& [key, value] : events.value()) {
    auto event = event_from_json(nlohmann::json::parse(value, nullptr, false));
    if (!event.ok()) continue;
    events_[key.substr(0, key.find('/'))].push_back(std::move(event.value()));
  }
  return salvaged;
}

const Job* JobTable::find(const std::string& job_id) const {
  auto it = by_id_.find(job_id);
  return it == by_id_.end() ? nullptr : it->second;
}

Job* JobTable::find(const std::string& job_id) {
  auto it = by_id_.find(job_id);
  return it == by_id_.end() ? nullptr : it->second;
}

const Job* JobTable::find_submission(const std::string& owner, const std::string& submission_id) const {
  const std::string id = submission(owner, submission_id);
  return id.empty() ? nullptr : find(id);
}

std::string JobTable::submission(const std::string& owner, const std::string& submission_id) const {
  if (submission_id.empty()) return "";
  auto it = submission_ids_.find(submission_key(owner, submission_id));
  return it == submission_ids_.end() ? "" : it->second;
}

std::vector<const Job*> JobTable::list() const {
  std::vector<const Job*> out;
  out.reserve(newest_.size());
  for (const auto& [_, job] : newest_) out.push_back(job);
  return out;
}

Job& JobTable::add(Job job, JobEvent first) {
  const std::string id = job.id;
  events_[id].push_back(std::move(first));
  auto existing = jobs_.find(id);
  if (existing != jobs_.end()) newest_.erase({existing->second.queue_seq, &existing->second});
  Job& added = jobs_[id] = std::move(job);
  by_id_[id] = &added;
  newest_.emplace(added.queue_seq, &added);
  recount(added);
  return added;
}

void JobTable::reserve_submission(const std::string& owner, const std::string& submission_id,
                                  const std::string& job_id) {
  submission_ids_[submission_key(owner, submission_id)] = job_id;
}

void JobTable::release_submission(const std::string& owner, const std::string& submission_id) {
  submission_ids_.erase(submission_key(owner, submission_id));
}

void JobTable::remove(const std::string& job_id) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;
  const Job& job = it->second;
  if (!job.spec.submission_id.empty()) release_submission(job.owner, job.spec.submission_id);
  active_.erase(job_id);
  events_.erase(job_id);
  by_id_.erase(job_id);
  newest_.erase({job.queue_seq, &job});
  if (auto counted = counted_.find(&job); counted != counted_.end()) {
    --counts_[static_cast<size_t>(counted->second)];
    counted_.erase(counted);
  }
  jobs_.erase(it);
}

const std::vector<JobEvent>& JobTable::events(const std::string& job_id) const {
  auto it = events_.find(job_id);
  return it == events_.end() ? kNoEvents : it->second;
}

std::map<JobState, int> JobTable::count_by_state() const {
  std::map<JobState, int> counts;
  for (size_t i = 0; i < counts_.size(); ++i) {
    if (counts_[i] > 0) counts[static_cast<JobState>(i)] = counts_[i];
  }
  return counts;
}

void JobTable::recount(const Job& job) {
  auto [counted, added] = counted_.try_emplace(&job, job.state);
  if (!added) {
    if (counted->second == job.state) return;
    --counts_[static_cast<size_t>(counted->second)];
    counted->second = job.state;
  }
  ++counts_[static_cast<size_t>(job.state)];
}

std::map<std::string, Resources> JobTable::allocations() const {
  std::map<std::string, Resources> out;
  for (const auto& [_, job] : active_) {
    const AttemptRecord* attempt = job->current_attempt();
    if (!attempt) continue;
    for (const auto& task : attempt->tasks) {
      if (!task.terminal()) out[task.node_id] += job->spec.per_task();
    }
  }
  return out;
}

void JobTable::for_each_holding(const std::function<void(const Job&, const sched::Use&)>& fn) const {
  for (const auto& [_, active] : active_) {
    const Job& job = *active;
    const AttemptRecord* attempt = job.current_attempt();
    if (!attempt) continue;
    sched::Use held;
    for (const auto& task : attempt->tasks) {
      if (task.terminal()) continue;
      held.held += job.spec.per_task();
      held.running_jobs = 1;
    }
    fn(job, held);
  }
}

std::map<std::string, sched::Use> JobTable::use_by_owner() const {
  std::map<std::string, sched::Use> use;
  for_each_holding([&use](const Job& job, const sched::Use& held) { use[job.owner] += held; });
  return use;
}

std::map<sched::QueueUser, sched::Use> JobTable::use_by_queue() const {
  std::map<sched::QueueUser, sched::Use> use;
  for_each_holding([&use](const Job& job, const sched::Use& held) {
    if (!job.spec.queue.empty()) use[{job.spec.queue, job.owner}] += held;
  });
  return use;
}

JobTable::PackageUse JobTable::package_use(const std::string& hash) const {
  PackageUse use = PackageUse::kUnused;
  for (const auto& [_, job] : jobs_) {
    if (job.spec.runtime_env.working_dir.empty() || job.spec.runtime_env.working_dir_hash() != hash) continue;
    if (!job.terminal()) return PackageUse::kLiveJobs;
    use = PackageUse::kFinishedJobs;
  }
  return use;
}

int JobTable::live_in_queue(const std::string& name) const {
  int n = 0;
  for (const auto& [_, job] : jobs_) n += !job.terminal() && job.spec.queue == name;
  return n;
}

}  // namespace ag::head
