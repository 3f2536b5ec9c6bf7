// Metrics: what GET /metrics exports in the Prometheus text format (version 0.0.4).
//
// Gauges (nodes and jobs by state, running tasks, capacity and allocation) are read
// from the job layer, node registry and log store at scrape time, so they always
// equal what the REST API shows. What only exists as a stream of events is kept here:
// the scheduling and start latency histograms (fed by the JobEvents observer) and the
// API request counter (fed by count_request around every response).
//
// Owned by the head daemon; io thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "head/events/event_log.h"
#include "head/jobs/job.h"
#include "head/jobs/job_layer.h"
#include "head/leader/head_role.h"
#include "head/logs/log_store.h"
#include "head/store/kv_store.h"
#include "head/nodes/node_registry.h"
#include "net/http_types.h"

namespace ag::head::dashboard {

// A Prometheus histogram with fixed upper bounds (seconds).
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  uint64_t count() const { return count_; }
  // Appends `name_bucket{le=...}`, `name_sum` and `name_count` lines.
  void render(const std::string& name, std::string& out) const;

 private:
  std::vector<double> upper_bounds_;
  std::vector<uint64_t> bucket_counts_;  // not cumulative; one per bound
  double sum_ = 0;
  uint64_t count_ = 0;
};

// Appends a histogram's `name_bucket{le=...}`, `name_sum` and `name_count` lines from
// its bounds and per-bound (not cumulative) counts.
void render_histogram(const std::string& name, const std::vector<double>& upper_bounds,
                      const std::vector<uint64_t>& counts, double sum, uint64_t count, std::string& out);

// The route a request path belongs to, with ids replaced ("/api/jobs/{id}/logs"), so
// that request counts have a bounded set of labels. Unknown paths map to "other".
std::string route_template(const std::string& path);

class Metrics {
 public:
  struct Deps {
    const JobLayer& jobs;
    const NodeRegistry& nodes;
    const LogStore& logs;
    const store::KvStore& store;
    const HeadRole& role;
  };
  explicit Metrics(Deps deps);

  // JobEvents observer: records a job's scheduling latency (submitted -> first
  // attempt placed) and start latency (submitted -> every task of the first attempt
  // running), each once per job, from the job's own timestamps.
  void on_job_changed(const Job& job);
  void on_job_removed(const std::string& job_id);
  // EventLog listener: counts the jobs that end, by how (ag_jobs_finished_total).
  void on_event(const ClusterEvent& event);

  // Wraps `respond` so that the response is counted under the request's route
  // template, method and status code.
  net::Respond count_request(const net::HttpRequest& request, net::Respond respond);

  // More families, rendered after the head's own (the log exporter's).
  void add_renderer(std::function<void(std::string& out)> render) { renderers_.push_back(std::move(render)); }

  // The whole exposition, as served at /metrics.
  std::string render() const;

  const Histogram& scheduling_latency() const { return scheduling_latency_; }
  const Histogram& start_latency() const { return start_latency_; }

 private:
  Deps deps_;
  Histogram scheduling_latency_;
  Histogram start_latency_;
  // Jobs not yet finished, with which latencies were recorded (bit 1: placed, bit 2:
  // started). Entries go when the job finishes, so this holds live jobs only.
  std::unordered_map<std::string, uint8_t> recorded_;
  // (route, method, code) -> count. Shared with the wrapped responders, which may
  // outlive a request but never the Metrics (both die with the io loop).
  std::map<std::tuple<std::string, std::string, int>, uint64_t> requests_;
  std::vector<std::function<void(std::string& out)>> renderers_;
  std::map<std::string, uint64_t> finished_ = {{"SUCCEEDED", 0}, {"FAILED", 0}, {"STOPPED", 0}};
};

}  // namespace ag::head::dashboard
