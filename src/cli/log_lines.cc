#include "cli/log_lines.h"

#include <chrono>
#include <ctime>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/api_client.h"
#include "cli/table.h"
#include "net/http_types.h"

namespace ag::cli {
namespace {

// How often a follow asks again while nothing new has arrived.
constexpr int kFollowPollMs = 300;
// A head that is restarting is waited for this long.
constexpr double kReconnectWindowS = 30;

}  // namespace

std::string utc_timestamp(int64_t ms) {
  std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[48];
  size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%03dZ", static_cast<int>(ms % 1000));
  return buf;
}

bool print_job_lines(const Connection& conn, const std::string& job_id, const LinesOptions& options,
                     std::ostream& out) {
  std::optional<int> attempt = options.attempt;
  std::string cursor;
  for (bool first = true;; first = false) {
    std::string target = "/api/jobs/" + net::url_encode(job_id) + "/lines?";
    if (attempt) target += "attempt=" + std::to_string(*attempt) + "&";
    if (options.task_index) target += "task_index=" + std::to_string(*options.task_index) + "&";
    if (first && options.tail > 0) target += "tail=" + std::to_string(options.tail) + "&";
    if (first && options.since_ms) target += "since_ms=" + std::to_string(*options.since_ms) + "&";
    if (!cursor.empty()) target += "from=" + cursor;
    auto page = call_json_retrying(conn, "GET", target, "", 40000, kReconnectWindowS);
    if (!page.ok()) {
      fail(page.error());
      return false;
    }
    const nlohmann::json& body = page.value();
    attempt = body["attempt"].get<int>();  // a follow stays with the attempt it began on
    const bool several = body["tasks"].size() > 1;
    for (const auto& line : body["lines"]) {
      if (options.timestamps) out << utc_timestamp(line[1].get<int64_t>()) << " ";
      if (several) out << "[rank " << line[0].get<int>() << "] ";
      const std::string& text = line[2].get_ref<const std::string&>();
      out << (options.raw ? text : terminal_safe(text, true)) << "\n";
    }
    out.flush();
    cursor.clear();
    for (const auto& next : body["next"]) cursor += (cursor.empty() ? "" : ",") + std::to_string(next.get<int64_t>());
    if (!options.follow || body["complete"].get<bool>()) return true;
    if (body["lines"].empty()) std::this_thread::sleep_for(std::chrono::milliseconds(kFollowPollMs));
  }
}

}  // namespace ag::cli
