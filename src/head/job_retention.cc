// Deleting finished jobs: one at a user's request (DELETE /api/jobs/{id}) or all that
// finished before the head's retention period. A deletion is written with the next
// batch of job changes (JobWriter), so it lands after every earlier
// write of the job; only then is the job dropped from memory and its logs removed.
#include <spdlog/spdlog.h>

#include "head/job_manager.h"

namespace ag::head {

void JobManager::delete_job(const std::string& job_id, std::function<void(Status)> done) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return done(not_found("no job with id '" + job_id + "'; list jobs with `ag list-jobs`"));
  const Job& job = it->second;
  if (!job.terminal()) {
    return done(Error{ErrorCode::kConflict, "job " + job_id + " is " + to_string(job.state) +
                                                "; only a finished job can be deleted: stop it first (`ag stop-job " +
                                                job_id + "`)"});
  }
  if (writer_.removing(job_id)) {
    return done(Error{ErrorCode::kConflict, "job " + job_id + " is being deleted already"});
  }
  // A held job may still wait on it: its outcome is what lets that job start.
  if (auto waiting = gates_.dependents(job_id); !waiting.empty()) {
    return done(Error{ErrorCode::kConflict, "job " + job_id + " is a dependency of pending job " + *waiting.begin() +
                                                "; delete it once that job has started or ended"});
  }
  writer_.remove(job_id, std::move(done));
}

int JobManager::delete_finished_before(int64_t before_ms) {
  std::vector<std::string> old;
  for (const auto& [id, job] : jobs_) {
    if (job.terminal() && job.finished_ms > 0 && job.finished_ms < before_ms && !writer_.removing(id) &&
        gates_.dependents(id).empty()) {
      old.push_back(id);
    }
  }
  for (const auto& id : old) {
    delete_job(id, [id](const Status& s) {
      if (!s) spdlog::warn("could not delete job {} past its retention: {}", id, s.error().message);
    });
  }
  return static_cast<int>(old.size());
}

JobManager::PackageUse JobManager::package_use(const std::string& hash) const {
  PackageUse use = PackageUse::kUnused;
  for (const auto& [_, job] : jobs_) {
    if (job.spec.runtime_env.working_dir.empty() || job.spec.runtime_env.working_dir_hash() != hash) continue;
    if (!job.terminal()) return PackageUse::kLiveJobs;
    use = PackageUse::kFinishedJobs;
  }
  return use;
}

void JobManager::forget(const std::string& job_id) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;
  const Job& job = it->second;
  if (!job.spec.submission_id.empty()) submission_ids_.erase(job.owner + "\n" + job.spec.submission_id);
  writer_.forget(job_id);
  events_.erase(job_id);
  loop_.take_back(job_id);
  arrays_.forget(job);
  jobs_.erase(it);
  deps_.logs.remove_job(job_id);
  listeners_.removed(job_id);
}

}  // namespace ag::head
