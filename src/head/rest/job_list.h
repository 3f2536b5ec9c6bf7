// GET /api/jobs: one page of the job list.
//   state     only jobs in this state
//   q         only jobs whose id, name, submission id, owner, entrypoint or a label
//             (KEY=VALUE) contains this text, case-insensitively
//   owner, queue   only jobs of this user, of this queue
//   name      only jobs whose name matches this shell pattern ("train-*")
//   since_ms  only jobs submitted at or after this time (ms since the epoch; not in the
//             future)
//   sort      submitted, name, owner, state or duration, ascending; a leading '-'
//             descending. Without it: newest first (-submitted).
//   limit, offset / after   the page
// Answer: {"jobs": [summary...], "total", "offset", "limit", "next"}. A PENDING job's
// summary has "queue_position" (1: the next the scheduler weighs). A bad parameter is a
// 400 that names it.
#pragma once

#include <cstdint>

#include "head/jobs/job_layer.h"
#include "net/http_types.h"

namespace ag::head {

void list_jobs(const JobLayer& jobs, int64_t now_ms, const net::HttpRequest& req, net::Respond respond);

}  // namespace ag::head
