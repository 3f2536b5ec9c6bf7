#include "cli/array_view.h"

#include <nlohmann/json.hpp>
#include <string>

#include "cli/table.h"

namespace ag::cli {

using nlohmann::json;

bool is_array_view(const json& answer) {
  return answer.is_object() && answer.contains("array_id") && answer.contains("elements");
}

void print_array_status(std::ostream& out, const json& array) {
  out << "Array " << array["array_id"].get<std::string>() << ": " << array["state"].get<std::string>() << "\n  "
      << array["size"].get<int64_t>() << " jobs";
  if (array["max_running"].get<int>() > 0) out << ", at most " << array["max_running"].get<int>() << " at once";
  out << ":";
  for (const char* state : {"RUNNING", "PENDING", "SUCCEEDED", "FAILED", "STOPPED"}) {
    if (array["counts"].contains(state)) out << " " << array["counts"][state].get<int>() << " " << state;
  }
  out << "\n";
  Table table({"INDEX", "JOB", "STATE", "MESSAGE"});
  for (const auto& job : array["elements"]) {
    table.add({job["array_index"].dump(), job["job_id"].get<std::string>(), job["state"].get<std::string>(),
               terminal_safe(job["message"].get<std::string>(), false)});
  }
  table.print(out);
}

LogsPrinted print_array_lines(const Connection& conn, const json& array, const LinesOptions& options,
                              std::ostream& out) {
  LogsPrinted printed = LogsPrinted::kWhole;
  for (const auto& job : array["elements"]) {
    const std::string id = job["job_id"].get<std::string>();
    out << "==> " << id << " (index " << job["array_index"].dump() << ", " << job["state"].get<std::string>()
        << ") <==\n";
    // An element that never ran has no output to ask for.
    if (job["attempts"].get<int64_t>() == 0) continue;
    const LogsPrinted one = print_job_logs(conn, id, options, out);
    if (one == LogsPrinted::kFailed || printed == LogsPrinted::kWhole) printed = one;
  }
  return printed;
}

}  // namespace ag::cli
