#include "head/jobs/job_retention.h"

#include <spdlog/spdlog.h>

#include <vector>

namespace ag::head {

void JobRetention::delete_job(const std::string& job_id, std::function<void(Status)> done) {
  const Job* job = u_.jobs.find(job_id);
  if (!job) return done(not_found("no job with id '" + job_id + "'; list jobs with `ag list-jobs`"));
  if (!job->terminal()) {
    return done(Error{ErrorCode::kConflict, "job " + job_id + " is " + to_string(job->state) +
                                                "; only a finished job can be deleted: stop it first (`ag stop-job " +
                                                job_id + "`)"});
  }
  if (u_.writer.removing(job_id)) {
    return done(Error{ErrorCode::kConflict, "job " + job_id + " is being deleted already"});
  }
  // A held job may still wait on it: its outcome is what lets that job start.
  if (auto waiting = u_.gates.dependents(job_id); !waiting.empty()) {
    return done(Error{ErrorCode::kConflict, "job " + job_id + " is a dependency of pending job " + *waiting.begin() +
                                                "; delete it once that job has started or ended"});
  }
  u_.writer.remove(job_id, std::move(done));
}

int JobRetention::delete_finished_before(int64_t before_ms) {
  std::vector<std::string> old;
  for (const auto& [id, job] : u_.jobs.all()) {
    if (job.terminal() && job.finished_ms > 0 && job.finished_ms < before_ms && !u_.writer.removing(id) &&
        u_.gates.dependents(id).empty()) {
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

void JobRetention::forget(const std::string& job_id) {
  const Job* job = u_.jobs.find(job_id);
  if (!job) return;
  u_.writer.forget(job_id);
  u_.loop.take_back(job_id);
  u_.arrays.forget(*job);
  u_.jobs.remove(job_id);
  u_.logs.remove_job(job_id);
  u_.listeners.removed(job_id);
}

}  // namespace ag::head
