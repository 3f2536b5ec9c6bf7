#include "head/dashboard/event_hub.h"

#include <map>
#include <optional>

#include <nlohmann/json.hpp>

#include "head/jobs/job_codec.h"
#include "head/nodes/node_codec.h"

namespace ag::head::dashboard {
namespace {

using nlohmann::json;

constexpr auto kFlushDelay = std::chrono::milliseconds(100);
constexpr auto kTickPeriod = std::chrono::seconds(1);
constexpr int64_t kPingEveryMs = 15000;

std::string dump(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string format_event(const std::string& event, const std::string& data) {
  // `data` is one line of JSON (dump() escapes newlines), as SSE requires.
  return "event: " + event + "\ndata: " + data + "\n\n";
}

}  // namespace

EventHub::EventHub(Deps deps) : deps_(deps), flush_timer_(deps.io), tick_timer_(deps.io) {}

EventHub::~EventHub() {
  *alive_ = false;
  for (auto& stream : streams_) stream->close();
}

net::HttpResponse EventHub::open_stream() {
  net::HttpResponse res{200, "text/event-stream; charset=utf-8", ""};
  res.headers.emplace_back("X-Content-Type-Options", "nosniff");
  res.on_stream = [this, alive = alive_](std::shared_ptr<net::HttpStream> stream) {
    if (*alive) add(std::move(stream));
  };
  return res;
}

void EventHub::add(std::shared_ptr<net::HttpStream> stream) {
  // "retry" makes a browser reconnect after 2 s instead of its default 3-5 s.
  stream->write("retry: 2000\n" + format_event("hello", dump({{"time_ms", deps_.clock.now_ms()}})));
  // The latest snapshot (at most a second old) so the page has nodes at once; the
  // next tick sends a newer one only if it differs.
  if (last_nodes_.empty()) last_nodes_ = nodes_snapshot();
  stream->write(format_event("nodes", last_nodes_));
  std::weak_ptr<net::HttpStream> weak = stream;
  stream->on_close([this, alive = alive_, weak]() {
    if (!*alive) return;
    auto gone = weak.lock();
    std::erase_if(streams_, [&](const auto& s) { return !s->is_open() || s == gone; });
  });
  streams_.push_back(std::move(stream));
  if (!ticking_) {
    ticking_ = true;
    last_ping_steady_ms_ = deps_.clock.steady_ms();
    tick();
  }
}

void EventHub::broadcast(const std::string& event, const std::string& data) {
  std::string message = format_event(event, data);
  // write() may close a stalled stream; its close callback runs later and removes it.
  for (const auto& stream : streams_) stream->write(message);
}

void EventHub::on_job_changed(const Job& job) { mark_dirty(job.id); }

void EventHub::on_job_removed(const std::string& job_id) { mark_dirty(job_id); }

void EventHub::mark_dirty(const std::string& job_id) {
  if (streams_.empty()) return;
  dirty_jobs_.insert(job_id);
  if (flush_armed_) return;
  flush_armed_ = true;
  flush_timer_.expires_after(kFlushDelay);
  flush_timer_.async_wait([this, alive = alive_](const boost::system::error_code& ec) {
    if (ec || !*alive) return;
    flush_armed_ = false;
    flush_jobs();
  });
}

void EventHub::flush_jobs() {
  std::set<std::string> ids = std::move(dirty_jobs_);
  dirty_jobs_.clear();
  if (streams_.empty() || ids.empty()) return;
  json jobs = json::array();
  json deleted = json::array();
  // A pending job's row shows its place in the queue, so the pushed summary carries it
  // as the list's answer does (a row replaced without it would lose it).
  std::optional<std::map<uint64_t, int64_t>> positions;
  for (const auto& id : ids) {
    if (const Job* job = deps_.jobs.table.find(id)) {
      json summary = job_summary_json(*job);
      if (job->state == JobState::kPending) {
        if (!positions) positions = queue_positions(deps_.jobs);
        if (auto at = positions->find(job->queue_seq); at != positions->end()) summary["queue_position"] = at->second;
      }
      jobs.push_back(std::move(summary));
    } else {
      deleted.push_back(id);
    }
  }
  json counts = json::object();
  for (auto s : {JobState::kPending, JobState::kRunning, JobState::kSucceeded, JobState::kFailed, JobState::kStopped}) {
    counts[to_string(s)] = 0;
  }
  for (const auto& [state, n] : deps_.jobs.table.count_by_state()) counts[to_string(state)] = n;
  broadcast("jobs", dump({{"jobs", jobs}, {"deleted", deleted}, {"counts", counts}}));
}

std::string EventHub::nodes_snapshot() const {
  auto allocations = deps_.jobs.table.allocations();
  json nodes = json::array();
  for (const auto& [id, node] : deps_.nodes.nodes()) {
    json entry = node_to_json(node, allocations[id]);
    entry["sample"] = node.usage.empty() ? json(nullptr) : usage_to_json(node.usage.back());
    nodes.push_back(std::move(entry));
  }
  return dump({{"nodes", nodes}});
}

void EventHub::tick() {
  if (streams_.empty()) {
    ticking_ = false;
    last_nodes_.clear();
    return;
  }
  std::string nodes = nodes_snapshot();
  if (nodes != last_nodes_) {
    last_nodes_ = nodes;
    broadcast("nodes", nodes);
  }
  int64_t now = deps_.clock.steady_ms();
  if (now - last_ping_steady_ms_ >= kPingEveryMs) {
    last_ping_steady_ms_ = now;
    for (const auto& stream : streams_) stream->write(": ping\n\n");
  }
  tick_timer_.expires_after(kTickPeriod);
  tick_timer_.async_wait([this, alive = alive_](const boost::system::error_code& ec) {
    if (!ec && *alive) tick();
  });
}

}  // namespace ag::head::dashboard
