// EventHub: the dashboard's live updates, pushed to every open GET /api/stream as
// server-sent events (text/event-stream).
//
//   JobEvents observer --on_job_changed--> dirty job ids --(<= 1 flush / 100 ms)--> "jobs"
//   node registry, read every second while anyone listens ------------------------> "nodes"
//
// Events:
//   event: hello  data: {"time_ms": ...}                       at connect
//   event: jobs   data: {"jobs": [summary...], "counts": {STATE: n}}
//   event: nodes  data: {"nodes": [node + "allocated" + "sample": latest usage]}
// and a comment line every 15 s so that dead connections are noticed.
//
// Job changes are coalesced so that a burst of thousands of changes costs one message
// per 100 ms. Nodes have no change observer; their usage changes with every heartbeat
// anyway, so the hub takes one snapshot a second (only while someone listens) and sends
// it when it differs from the last one. Io thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/clock.h"
#include "head/jobs/job.h"
#include "head/jobs/job_layer.h"
#include "head/nodes/node_registry.h"
#include "net/http_types.h"

namespace ag::head::dashboard {

class EventHub {
 public:
  struct Deps {
    boost::asio::io_context& io;
    const JobLayer& jobs;
    const NodeRegistry& nodes;
    const Clock& clock;
  };
  explicit EventHub(Deps deps);
  ~EventHub();

  // The streamed response for GET /api/stream: registers the stream once it is open.
  net::HttpResponse open_stream();

  // JobEvents observer.
  void on_job_changed(const Job& job);
  // A deleted job: the next "jobs" message lists its id under "deleted".
  void on_job_removed(const std::string& job_id);

  size_t subscribers() const { return streams_.size(); }

 private:
  void mark_dirty(const std::string& job_id);
  void add(std::shared_ptr<net::HttpStream> stream);
  void broadcast(const std::string& event, const std::string& data);
  void flush_jobs();
  void tick();
  std::string nodes_snapshot() const;

  Deps deps_;
  std::vector<std::shared_ptr<net::HttpStream>> streams_;
  std::set<std::string> dirty_jobs_;
  boost::asio::steady_timer flush_timer_;
  bool flush_armed_ = false;
  boost::asio::steady_timer tick_timer_;
  bool ticking_ = false;
  std::string last_nodes_;
  int64_t last_ping_steady_ms_ = 0;
  // Lets callbacks that outlive the hub (stream close notifications) see it is gone.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ag::head::dashboard
