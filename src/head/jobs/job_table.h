// JobTable: the head's jobs in memory. It owns every job record, each job's event log,
// the index of jobs with a live attempt, the submission ids (per owner) and the queue
// sequence. It answers the queries over all jobs (newest first, counts, what live tasks
// hold, who uses a package) and loads them from the store at start. It decides nothing:
// the job controller changes records through the state machine, then tells the table
// which jobs became active or stopped being so. Io thread only.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/resources.h"
#include "common/result.h"
#include "head/jobs/job.h"
#include "head/scheduler/quotas.h"
#include "head/store/kv_store.h"

namespace ag::head {

class JobTable {
 public:
  // Reads every job and event (at start). A stored job this version cannot read is kept
  // as FAILED when it can be (its id is in the result, to be written again), else
  // skipped. Errors: the store's.
  Result<std::vector<std::string>> load(store::KvStore& store, int64_t now_ms);

  const Job* find(const std::string& job_id) const;
  Job* find(const std::string& job_id);
  // The job `owner` submitted with `submission_id` (an alias of its id), or null.
  const Job* find_submission(const std::string& owner, const std::string& submission_id) const;
  // The id kept for (owner, submission_id), stored or still being stored; "" if none.
  std::string submission(const std::string& owner, const std::string& submission_id) const;
  // Every job, by id; and newest first (kept in that order: no sort per call).
  const std::map<std::string, Job>& all() const { return jobs_; }
  std::vector<const Job*> list() const;

  // A new job, accepted (durable) with its first event; the next queue sequence number
  // for one about to be.
  Job& add(Job job, JobEvent first);
  uint64_t next_seq() { return next_seq_++; }
  // Keeps `job_id` as the job of (owner, submission_id) before it is durable; forgotten
  // again when the write fails.
  void reserve_submission(const std::string& owner, const std::string& submission_id, const std::string& job_id);
  void release_submission(const std::string& owner, const std::string& submission_id);
  // Drops a deleted job with its events and submission id.
  void remove(const std::string& job_id);

  const std::vector<JobEvent>& events(const std::string& job_id) const;
  void add_event(const std::string& job_id, JobEvent event) { events_[job_id].push_back(std::move(event)); }

  // Jobs with a live attempt (placed, running or being torn down).
  const std::map<std::string, Job*>& active() const { return active_; }
  void activate(Job& job) { active_.emplace(job.id, &job); }
  void deactivate(const std::string& job_id) { active_.erase(job_id); }

  // Counts by state (only states some job is in), for the cluster summary: kept as the
  // jobs change, so that a summary polled often costs nothing per job kept.
  std::map<JobState, int> count_by_state() const;
  // `job` may be in another state than when it was last counted: the job controller
  // calls this with every change it applies (add, remove and load count by themselves).
  void recount(const Job& job);
  // What live tasks hold on each node.
  std::map<std::string, Resources> allocations() const;
  // What each user's running jobs hold now, in all and in each queue.
  std::map<std::string, sched::Use> use_by_owner() const;
  std::map<sched::QueueUser, sched::Use> use_by_queue() const;
  // Who has the working_dir package `hash`: no job kept, only finished ones, or a
  // pending or running one.
  enum class PackageUse { kUnused, kFinishedJobs, kLiveJobs };
  PackageUse package_use(const std::string& hash) const;
  // Jobs not finished that name queue `name`.
  int live_in_queue(const std::string& name) const;

 private:
  void for_each_holding(const std::function<void(const Job&, const sched::Use&)>& fn) const;

  std::map<std::string, Job> jobs_;
  // The same by hash, for find (called several times per placement): entries of jobs_
  // stay where they are.
  std::unordered_map<std::string, Job*> by_id_;
  // Each job's events, by hash (looked up at every change of a job); the vectors stay
  // where they are, as the writer holds them while it writes.
  std::unordered_map<std::string, std::vector<JobEvent>> events_;
  // Jobs with a live attempt, to their entry in jobs_ (a std::map: entries stay where
  // they are, and an active job is never removed).
  std::map<std::string, Job*> active_;
  std::map<std::string, std::string> submission_ids_;  // "owner\nsubmission_id" -> job id
  uint64_t next_seq_ = 1;
  // Every job, newest first (by queue sequence, set at submit and never changed; the
  // entry's address breaks ties), for list() without a sort per call.
  std::set<std::pair<uint64_t, const Job*>, std::greater<>> newest_;
  // Each job's state as counted in counts_ (by its entry in jobs_).
  std::unordered_map<const Job*, JobState> counted_;
  std::array<int, api::kJobStates.size()> counts_{};  // by JobState
};

}  // namespace ag::head
