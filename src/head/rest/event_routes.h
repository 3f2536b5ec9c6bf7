// EventRoutes: GET /api/events, the cluster's job and node events in order
// (head/events/event_log.h), for `ag events`, scripts and dashboards.
//
//   ?after=SEQ           events after this cursor, oldest first (else: the newest)
//   ?job=J ?node=N       one job's (or array's) events; one node's, and job events naming it
//   ?types=a,b           these types only ("job.failed,node.dead"; an unknown one is a 400)
//   ?since_ms=T          at or after this wall time
//   ?limit=N             at most N events (100 by default, 10,000 at most)
//   ?wait_ms=W           with `after`: when nothing is there yet, wait up to W ms for
//                        the next matching event (a long poll, as `ag events -f` uses)
//   ?follow=1, or Accept: text/event-stream
//                        server-sent events: `id:` is each event's seq, so a client that
//                        reconnects with Last-Event-ID (or ?after) misses nothing the
//                        head still holds; a comment every 15 s keeps the line alive
//
// JSON answer: {"events": [{seq, time_ms, type, job_id, node_id, owner, message,
// last_lines?}], "cursor": SEQ, "truncated": bool}. Everyone who may list jobs sees
// every event; a failed job's last lines (`last_lines`) only those who may read its
// logs. Io thread only.
#pragma once

#include <memory>

#include "head/rest/rest_deps.h"
#include "head/rest/route_table.h"
#include "net/http_types.h"

namespace ag::head {

class EventRoutes {
 public:
  explicit EventRoutes(RestDeps deps);
  ~EventRoutes();
  EventRoutes(const EventRoutes&) = delete;
  EventRoutes& operator=(const EventRoutes&) = delete;

  void list(const Call& call, net::Respond respond);

 private:
  struct Followers;
  RestDeps deps_;
  std::shared_ptr<Followers> followers_;
};

}  // namespace ag::head
