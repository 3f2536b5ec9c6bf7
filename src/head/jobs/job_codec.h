// Job records as JSON: the stored form (jobs table) and the REST API's form are the
// same document, so that what `GET /api/jobs/{id}` shows is what survives a restart.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <memory>
#include <optional>
#include <string>

#include "common/result.h"
#include "head/jobs/job.h"

namespace ag::head {

nlohmann::json job_to_json(const Job& job);
// The stored form of a job: the text job_to_json(job).dump() writes, written without
// the tree (every change of a job is written ahead whole: this is the head's hot path).
// Uses job.spec_text when set. Throws what dump() throws (nlohmann::json::type_error
// for a string that is not UTF-8).
std::string job_record_text(const Job& job);
// job.spec_text made from job.spec; once the spec is final (it never changes after).
std::shared_ptr<const JobSpecText> make_spec_text(const api::JobSpec& spec);
// Errors: kInternal when a stored document is not a job record.
Result<Job> job_from_json(const nlohmann::json& doc);

// A stored job job_from_json refused (this version checks a field more strictly, or the
// record is damaged), kept rather than dropped: FAILED at `now_ms`, saying why, with
// what can still be read of it (id, entrypoint, owner, times). nullopt when not even
// its id can be read.
std::optional<Job> salvage_job(const nlohmann::json& doc, const std::string& why, int64_t now_ms);

nlohmann::json event_to_json(const JobEvent& event);
// event_to_json(event).dump(), without the tree; throws as job_record_text does.
std::string event_record_text(const JobEvent& event);
Result<JobEvent> event_from_json(const nlohmann::json& doc);

// Short form for job lists: no attempts, only the counts users scan for.
nlohmann::json job_summary_json(const Job& job);

// The events table's key of a job's event number `seq` ("JOB/00000003": a job's events
// sort in order).
std::string event_key(const std::string& job_id, size_t seq);

// Why a FAILED job failed: {attempt, task_index, node_id, node_address, reason,
// last_lines} of the task that failed first in its last attempt (its last lines of
// output, at most 50 lines / 8 KiB); null for other jobs. Not stored: built from the
// attempt, which keeps the lines.
nlohmann::json failure_json(const Job& job);

}  // namespace ag::head
