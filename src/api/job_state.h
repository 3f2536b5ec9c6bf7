// JobState and TaskState: the lifecycle states the head records and the REST API
// reports. Shared by the head (which moves jobs through them, head/jobs/job_state_machine.h)
// and by clients such as the CLI (which wait for a terminal one), so that both read the
// same upper-case wire names ("PENDING", "SUCCEEDED", ...) the same way.
#pragma once

#include <array>
#include <optional>
#include <string_view>

namespace ag::api {

// Which transitions happen when is the job state machine's business; here are only
// the states and their names.
enum class JobState { kPending, kRunning, kSucceeded, kFailed, kStopped };
enum class TaskState { kStarting, kRunning, kSucceeded, kFailed, kStopped };

// Every job state, in lifecycle order (the order summaries list them in).
inline constexpr std::array<JobState, 5> kJobStates = {JobState::kPending, JobState::kRunning, JobState::kSucceeded,
                                                       JobState::kFailed, JobState::kStopped};

// The wire name: "PENDING", "RUNNING", "SUCCEEDED", "FAILED", "STOPPED" (and
// "STARTING" for a task).
const char* to_string(JobState state);
const char* to_string(TaskState state);

// The state a wire name names; nullopt for anything else. Exact match: callers that
// accept other spellings (a `?state=` query in lower case) normalise first.
std::optional<JobState> parse_job_state(std::string_view text);
std::optional<TaskState> parse_task_state(std::string_view text);

// SUCCEEDED, FAILED and STOPPED: the job will not change state again.
bool is_terminal(JobState state);

}  // namespace ag::api
