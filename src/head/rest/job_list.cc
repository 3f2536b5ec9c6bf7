#include <algorithm>
#include <cctype>
#include <fnmatch.h>
#include <nlohmann/json.hpp>

#include "head/rest/job_list.h"
#include "head/jobs/job_codec.h"
#include "head/rest/route_helpers.h"

namespace ag::head {
namespace {

using json = nlohmann::json;

std::string lower(std::string text) {
  for (auto& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

bool contains(const std::string& haystack, const std::string& lowered_needle) {
  return lower(haystack).find(lowered_needle) != std::string::npos;
}

bool matches_search(const Job& job, const std::string& needle) {
  if (contains(job.id, needle) || contains(job.spec.name, needle) || contains(job.spec.submission_id, needle) ||
      contains(job.owner, needle) || contains(job.spec.entrypoint, needle)) {
    return true;
  }
  std::string label;
  for (const auto& [key, value] : job.spec.labels) {
    label.assign(key).append("=").append(value);
    if (contains(label, needle)) return true;
  }
  return false;
}

// How long the job ran (so far, for a running one); -1 when it never started.
int64_t run_ms(const Job& job, int64_t now_ms) {
  if (job.started_ms <= 0) return -1;
  return (job.finished_ms > 0 ? job.finished_ms : now_ms) - job.started_ms;
}

// Orders for `sort`, each ascending; ties fall back to newest first.
using Less = bool (*)(const Job*, const Job*, int64_t now_ms);
std::optional<Less> sort_order(const std::string& key) {
  if (key == "submitted") {
    return [](const Job* a, const Job* b, int64_t) { return a->queue_seq < b->queue_seq; };
  }
  if (key == "name") return [](const Job* a, const Job* b, int64_t) { return a->spec.name < b->spec.name; };
  if (key == "owner") return [](const Job* a, const Job* b, int64_t) { return a->owner < b->owner; };
  if (key == "state") {
    return [](const Job* a, const Job* b, int64_t) { return to_string(a->state) < to_string(b->state); };
  }
  if (key == "duration") {
    return [](const Job* a, const Job* b, int64_t now) { return run_ms(*a, now) < run_ms(*b, now); };
  }
  return std::nullopt;
}

// Which jobs a page lists: every parameter given must hold.
struct Filter {
  std::optional<JobState> state;
  std::string needle;  // `q`, lowercased
  std::string owner;   // exactly
  std::string queue;   // exactly
  std::string name;    // a shell pattern ("train-*")
  int64_t since_ms = 0;  // submitted at or after

  bool any() const {
    return state || !needle.empty() || !owner.empty() || !queue.empty() || !name.empty() || since_ms > 0;
  }
  bool matches(const Job& job) const {
    return (!state || job.state == *state) && (needle.empty() || matches_search(job, needle)) &&
           (owner.empty() || job.owner == owner) && (queue.empty() || job.spec.queue == queue) &&
           (name.empty() || ::fnmatch(name.c_str(), job.spec.name.c_str(), 0) == 0) && job.submitted_ms >= since_ms;
  }
};

// Reads the filter's parameters (state, q, owner, queue, name, since_ms); false after
// answering 400 for one that is wrong.
bool read_filter(const net::HttpRequest& req, int64_t now_ms, Filter* filter, net::Respond& respond) {
  const auto text = [&req](const char* name) {
    auto it = req.query.find(name);
    return it == req.query.end() ? std::string() : it->second;
  };
  if (const std::string state = text("state"); !state.empty()) {
    std::string upper = state;
    for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    filter->state = parse_job_state(upper);
    if (!filter->state) {
      respond(error_response(400, "unknown state '" + state + "'; use PENDING, RUNNING, SUCCEEDED, FAILED or STOPPED"));
      return false;
    }
  }
  for (const char* name : {"q", "owner", "queue", "name"}) {
    if (text(name).size() > 200) {
      respond(error_response(400, std::string("'") + name + "' is longer than 200 characters"));
      return false;
    }
  }
  filter->needle = lower(text("q"));
  filter->owner = text("owner");
  filter->queue = text("queue");
  filter->name = text("name");
  if (!query_int(req, "since_ms", 0, INT64_MAX, &filter->since_ms, respond)) return false;
  if (filter->since_ms > now_ms) {
    respond(error_response(400, "'since_ms' is in the future: give a time already past"));
    return false;
  }
  return true;
}

}  // namespace

void list_jobs(const JobLayer& jobs, int64_t now_ms, const net::HttpRequest& req, net::Respond respond) {
  // A page is bounded: a list of every job would hold the io thread for seconds.
  // Pages follow each other by offset, or by cursor (`after`: the previous page's
  // `next`), which stays right while new jobs arrive.
  int64_t limit = 1000, offset = 0;
  if (!query_int(req, "limit", 1, 1000, &limit, respond) ||
      !query_int(req, "offset", 0, INT64_MAX, &offset, respond)) {
    return;
  }
  std::optional<uint64_t> before_seq;
  if (auto it = req.query.find("after"); it != req.query.end() && !it->second.empty()) {
    if (offset != 0) return respond(error_response(400, "give either 'after' or 'offset', not both"));
    const Job* from = jobs.table.find(it->second);
    if (!from) {
      return respond(error_response(400, "'after': no job with id '" + it->second +
                                             "'; pass the 'next' of the previous page"));
    }
    before_seq = from->queue_seq;
  }
  Filter filter;
  if (!read_filter(req, now_ms, &filter, respond)) return;
  std::optional<Less> order;
  bool descending = false;
  if (auto it = req.query.find("sort"); it != req.query.end() && !it->second.empty()) {
    std::string key = it->second;
    descending = key[0] == '-';
    if (descending) key.erase(0, 1);
    order = sort_order(key);
    if (!order) {
      return respond(error_response(400, "unknown sort '" + it->second +
                                             "'; use submitted, name, owner, state or duration, with a leading '-' "
                                             "for the reverse order"));
    }
    if (before_seq) return respond(error_response(400, "'after' pages the newest-first order only; use 'offset' with 'sort'"));
  }
  // Only the page is serialized; the rest is counted (10,000 jobs cost a pass over
  // pointers, not 10,000 JSON documents). Newest first unless sorted.
  std::vector<const Job*> listed = jobs.table.list();
  if (filter.any()) {
    std::erase_if(listed, [&](const Job* job) { return !filter.matches(*job); });
  }
  if (order) {
    const int64_t now = now_ms;
    std::stable_sort(listed.begin(), listed.end(), [&](const Job* a, const Job* b) {
      return descending ? (*order)(b, a, now) : (*order)(a, b, now);
    });
  }
  json page = json::array();
  int64_t total = 0, skipped = 0;
  bool more = false;
  std::string last;
  std::optional<std::map<uint64_t, int64_t>> positions;
  for (const Job* job : listed) {
    ++total;
    if (before_seq && job->queue_seq >= *before_seq) continue;
    if (skipped++ < offset) continue;
    if (static_cast<int64_t>(page.size()) >= limit) {
      more = true;
      continue;
    }
    json summary = job_summary_json(*job);
    if (job->state == JobState::kPending) {
      if (!positions) positions = queue_positions(jobs);
      auto at = positions->find(job->queue_seq);
      if (at != positions->end()) summary["queue_position"] = at->second;
    }
    page.push_back(std::move(summary));
    last = job->id;
  }
  respond(json_response(200, {{"jobs", page},
                              {"total", total},
                              {"offset", offset},
                              {"limit", limit},
                              {"next", more && !order ? json(last) : json(nullptr)}}));
}

}  // namespace ag::head
