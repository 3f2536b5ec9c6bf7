// The lines of several tasks' logs merged in the order the head received them, as
// `srun -l` shows a job's ranks: what GET /api/jobs/{id}/lines answers (and so
// `ag logs JOB` for all ranks, --tail, --since, --timestamps, and the SDK's
// get_logs(task_index=None)). Pure: the pages come from LogStore::lines.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "head/log_store.h"

namespace ag::head {

struct TaskLinePage {
  int task_index = 0;
  LogStore::LinePage page;
};

// {"lines": [[task_index, time_ms, text], ...] ordered by time received, then task
// index, then place in the log; "next": [each task's cursor, in the pages' order];
// "truncated": whether a page was cut at its byte budget}. With `tail` > 0, only the
// last `tail` lines of the merge.
nlohmann::json merge_lines(const std::vector<TaskLinePage>& pages, int64_t tail);

}  // namespace ag::head
