#include "api/job_state.h"

namespace ag::api {

const char* to_string(JobState state) {
  switch (state) {
    case JobState::kPending:
      return "PENDING";
    case JobState::kRunning:
      return "RUNNING";
    case JobState::kSucceeded:
      return "SUCCEEDED";
    case JobState::kFailed:
      return "FAILED";
    case JobState::kStopped:
      return "STOPPED";
  }
  return "UNKNOWN";
}

const char* to_string(TaskState state) {
  switch (state) {
    case TaskState::kStarting:
      return "STARTING";
    case TaskState::kRunning:
      return "RUNNING";
    case TaskState::kSucceeded:
      return "SUCCEEDED";
    case TaskState::kFailed:
      return "FAILED";
    case TaskState::kStopped:
      return "STOPPED";
  }
  return "UNKNOWN";
}

std::optional<JobState> parse_job_state(std::string_view text) {
  for (JobState s : kJobStates) {
    if (text == to_string(s)) return s;
  }
  return std::nullopt;
}

std::optional<TaskState> parse_task_state(std::string_view text) {
  for (TaskState s :
       {TaskState::kStarting, TaskState::kRunning, TaskState::kSucceeded, TaskState::kFailed, TaskState::kStopped}) {
    if (text == to_string(s)) return s;
  }
  return std::nullopt;
}

bool is_terminal(JobState state) {
  return state == JobState::kSucceeded || state == JobState::kFailed || state == JobState::kStopped;
}

}  // namespace ag::api
