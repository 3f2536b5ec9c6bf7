// A job array as the CLI shows it: `ag status ARRAY` (counts and one line per element)
// and `ag logs ARRAY` (each element's output in turn, under a header line).
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <ostream>

#include "cli/log_lines.h"
#include "cli/session.h"

namespace ag::cli {

// Whether GET /api/jobs/{id}'s answer is a whole array rather than one job.
bool is_array_view(const nlohmann::json& answer);

void print_array_status(std::ostream& out, const nlohmann::json& array);

// Every element's lines (as print_job_logs prints one job's), element after element,
// each under "==> JOB (index N, STATE) <==". False after printing an error.
LogsPrinted print_array_lines(const Connection& conn, const nlohmann::json& array, const LinesOptions& options,
                       std::ostream& out);

}  // namespace ag::cli
