#include "head/rest/event_routes.h"

#include <algorithm>
#include <boost/asio/steady_timer.hpp>
#include <charconv>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "head/rest/route_helpers.h"

namespace ag::head {
namespace {

using nlohmann::json;

constexpr int64_t kDefaultLimit = 100;
constexpr int64_t kMaxLimit = 10000;
constexpr int64_t kMaxWaitMs = 60000;
constexpr int64_t kShownWaitMs = 2000;
constexpr auto kPingEvery = std::chrono::seconds(15);

std::string dump(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }

// One event as clients see it: a failed job's last lines only for those who may read
// its logs.
json event_view(const RestDeps& deps, const Principal& who, const ClusterEvent& event) {
  json j = {{"seq", event.seq},         {"time_ms", event.time_ms}, {"type", event.type},      {"job_id", event.job_id},
            {"node_id", event.node_id}, {"owner", event.owner},     {"message", event.message}};
  if (event.type == "job.failed") {
    const Job* job = deps.jobs.table.find(event.job_id);
    const AttemptRecord* attempt = job ? job->current_attempt() : nullptr;
    if (attempt && attempt->failure_tail && may_act_on(deps.access, who, *job)) {
      j["failed_task"] = attempt->failed_task;
      j["last_lines"] = *attempt->failure_tail;
    }
  }
  return j;
}

std::string sse_message(const RestDeps& deps, const Principal& who, const ClusterEvent& event) {
  // `data` is one line of JSON (dump() escapes newlines), as server-sent events need.
  return "id: " + std::to_string(event.seq) + "\nevent: " + event.type +
         "\ndata: " + dump(event_view(deps, who, event)) + "\n\n";
}

// The request's filter and cursor, or the 400 that says what is wrong with them.
struct Query {
  EventFilter filter;
  int64_t after = -1;  // -1: none given
  int64_t limit = kDefaultLimit;
  int64_t wait_ms = 0;
  bool follow = false;
};

Result<int64_t> whole_number(const std::string& name, const std::string& text, int64_t min, int64_t max) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v < min || v > max) {
    return invalid_argument(name + " must be a whole number between " + std::to_string(min) + " and " +
                            std::to_string(max) + ", got '" + text + "'");
  }
  return v;
}

Result<Query> read_query(const RestDeps& deps, const net::HttpRequest& req) {
  Query q;
  const auto param = [&req](const char* name) -> const std::string* {
    auto it = req.query.find(name);
    return it == req.query.end() ? nullptr : &it->second;
  };
  const auto number = [&](const char* name, int64_t min, int64_t max, int64_t* out) -> Status {
    const std::string* text = param(name);
    if (!text) return {};
    auto v = whole_number(std::string("query parameter '") + name + "'", *text, min, max);
    if (!v.ok()) return v.error();
    *out = v.value();
    return {};
  };
  if (Status s = number("after", 0, INT64_MAX, &q.after); !s) return s.error();
  if (Status s = number("limit", 1, kMaxLimit, &q.limit); !s) return s.error();
  if (Status s = number("wait_ms", 0, kMaxWaitMs, &q.wait_ms); !s) return s.error();
  if (Status s = number("since_ms", 0, INT64_MAX, &q.filter.since_ms); !s) return s.error();
  // A client resuming a stream says where it was (server-sent events' own header).
  if (const std::string& last = req.header("last-event-id"); !last.empty() && !param("after")) {
    auto v = whole_number("Last-Event-ID", last, 0, INT64_MAX);
    if (!v.ok()) return v.error();
    q.after = v.value();
  }
  if (const std::string* follow = param("follow")) {
    if (*follow != "1" && *follow != "true" && *follow != "0" && *follow != "false") {
      return invalid_argument("query parameter 'follow' must be 1 or 0, got '" + *follow + "'");
    }
    q.follow = *follow == "1" || *follow == "true";
  }
  if (req.header("accept").find("text/event-stream") != std::string::npos) q.follow = true;
  if (const std::string* types = param("types")) {
    size_t start = 0;
    while (start <= types->size()) {
      const size_t comma = std::min(types->find(',', start), types->size());
      const std::string type = types->substr(start, comma - start);
      start = comma + 1;
      if (type.empty()) continue;
      if (!known_event_type(type)) {
        return invalid_argument(unknown_event_type(type));
      }
      q.filter.types.insert(type);
    }
  }
  if (const std::string* job = param("job")) {
    if (!deps.jobs.table.find(*job) && !deps.jobs.arrays.find(*job)) {
      return not_found("no job with id '" + *job + "'; list jobs with `ag list-jobs`");
    }
    q.filter.job_id = *job;
  }
  if (const std::string* node = param("node")) {
    if (!deps.nodes.find(*node)) {
      // A node the head no longer lists may still have events.
      EventFilter of_node;
      of_node.node_id = *node;
      if (deps.jobs.cluster_events.newest(of_node, 1).events.empty()) {
        return not_found("no node with id '" + *node + "' and no events of one; list nodes with `ag list-nodes`");
      }
    }
    q.filter.node_id = *node;
  }
  if (q.wait_ms > 0 && q.after < 0) return invalid_argument("query parameter 'wait_ms' needs 'after' (a cursor)");
  return q;
}

}  // namespace

// The open streams of `?follow=1` and the long polls waiting for an event: each
// listens to the log until it ends. Shared with the callbacks, which may outlive the
// routes (a stream's close comes later).
struct EventRoutes::Followers {
  struct Follower {
    std::shared_ptr<net::HttpStream> stream;  // a stream, or
    net::Respond respond;                     // a long poll (answered once)
    Principal who;
    EventFilter filter;
    int64_t cursor = 0;
    int64_t limit = kDefaultLimit;
    uint64_t listener = 0;
    std::unique_ptr<boost::asio::steady_timer> timer;  // pings, or the poll's end
  };
  explicit Followers(RestDeps d) : deps(d) {}
  RestDeps deps;
  bool alive = true;
  std::map<uint64_t, Follower> open;
  uint64_t next = 1;

  void end(uint64_t id) {
    auto it = open.find(id);
    if (it == open.end()) return;
    deps.jobs.cluster_events.unlisten(it->second.listener);
    if (it->second.timer) it->second.timer->cancel();
    if (it->second.stream) it->second.stream->close();
    open.erase(it);
  }

  // Answers a long poll with what came after its cursor (perhaps nothing).
  void answer(uint64_t id) {
    auto it = open.find(id);
    if (it == open.end()) return;
    Follower f = std::move(it->second);
    open.erase(it);
    deps.jobs.cluster_events.unlisten(f.listener);
    if (f.timer) f.timer->cancel();
    const auto page = deps.jobs.cluster_events.after(f.cursor, f.filter, static_cast<size_t>(f.limit));
    json events = json::array();
    for (const auto& e : page.events) events.push_back(event_view(deps, f.who, e));
    f.respond(json_response(200, {{"events", events}, {"cursor", page.cursor}, {"truncated", page.truncated}}));
  }

  // Answers a read of the log (`q`), or holds it as a long poll.
  void read(Query q, const Principal& who, net::Respond respond, const std::shared_ptr<Followers>& self);

  void ping(uint64_t id, const std::shared_ptr<Followers>& self) {
    auto it = open.find(id);
    if (it == open.end()) return;
    it->second.timer->expires_after(kPingEvery);
    it->second.timer->async_wait([weak = std::weak_ptr<Followers>(self), id](const boost::system::error_code& ec) {
      auto f = weak.lock();
      if (ec || !f || !f->alive) return;
      auto found = f->open.find(id);
      if (found == f->open.end()) return;
      if (!found->second.stream->write(": keep-alive\n\n")) return f->end(id);
      f->ping(id, f);
    });
  }
};

EventRoutes::EventRoutes(RestDeps deps) : deps_(deps), followers_(std::make_shared<Followers>(deps)) {}

EventRoutes::~EventRoutes() {
  followers_->alive = false;
  std::vector<uint64_t> ids;
  for (const auto& [id, _] : followers_->open) ids.push_back(id);
  for (uint64_t id : ids) followers_->end(id);
}

void EventRoutes::list(const Call& call, net::Respond respond) {
  auto query = read_query(deps_, call.req);
  if (!query.ok()) return respond(error_response(query.error()));
  Query& q = query.value();
  EventLog& log = deps_.jobs.cluster_events;

  if (q.follow) {
    // From the cursor given, else from `since_ms`, else from now on.
    const int64_t cursor = q.after >= 0 ? q.after : q.filter.since_ms > 0 ? 0 : log.last_seq();
    net::HttpResponse res{200, "text/event-stream; charset=utf-8", ""};
    res.headers.emplace_back("X-Content-Type-Options", "nosniff");
    res.headers.emplace_back("Cache-Control", "no-cache");
    res.on_stream = [weak = std::weak_ptr<Followers>(followers_), who = call.who, filter = q.filter,
                     cursor](std::shared_ptr<net::HttpStream> stream) {
      auto f = weak.lock();
      if (!f || !f->alive) return stream->close();
      EventLog& log = f->deps.jobs.cluster_events;
      // What the head holds after the cursor, then each event as it comes.
      auto page = log.after(cursor, filter, SIZE_MAX);
      std::string backlog = "retry: 2000\n";
      if (page.truncated) backlog += ": some events after the cursor are no longer held\n";
      for (const auto& e : page.events) backlog += sse_message(f->deps, who, e);
      if (!stream->write(std::move(backlog))) return;
      const uint64_t id = f->next++;
      Followers::Follower& follower = f->open[id];
      follower.stream = stream;
      follower.who = who;
      follower.filter = filter;
      follower.timer = std::make_unique<boost::asio::steady_timer>(f->deps.io);
      follower.listener = log.listen([weak, id](const ClusterEvent& event) {
        auto f = weak.lock();
        if (!f) return;
        auto it = f->open.find(id);
        if (it == f->open.end() || !it->second.filter.matches(event)) return;
        if (!it->second.stream->write(sse_message(f->deps, it->second.who, event))) f->end(id);
      });
      stream->on_close([weak, id]() {
        if (auto f = weak.lock(); f && f->alive) f->end(id);
      });
      f->ping(id, f);
    };
    return respond(std::move(res));
  }

  // What happened before this call is shown once stored (a job's end a few ms after its
  // state): wait for that, though at most kShownWaitMs, for a store that does not answer.
  if (q.wait_ms == 0 && !log.all_shown()) {
    struct Held {
      Query q;
      Principal who;
      net::Respond respond;
      boost::asio::steady_timer timer;
      uint64_t waiter = 0;  // EventLog::when_shown's
      bool done = false;
    };
    auto held = std::make_shared<Held>(
        Held{std::move(q), call.who, std::move(respond), boost::asio::steady_timer(deps_.io), 0, false});
    std::weak_ptr<Followers> weak = followers_;
    auto go = [weak, held](bool timed_out) {
      auto f = weak.lock();
      if (held->done || !f || !f->alive) return;
      held->done = true;
      if (timed_out) {
        f->deps.jobs.cluster_events.forget_when_shown(held->waiter);
      } else {
        held->timer.cancel();
      }
      f->read(std::move(held->q), held->who, std::move(held->respond), f);
    };
    held->timer.expires_after(std::chrono::milliseconds(kShownWaitMs));
    held->timer.async_wait([go](const boost::system::error_code& ec) {
      if (!ec) go(true);
    });
    held->waiter = log.when_shown([go] { go(false); });
    return;
  }
  followers_->read(std::move(q), call.who, std::move(respond), followers_);
}

void EventRoutes::Followers::read(Query q, const Principal& who, net::Respond respond,
                                  const std::shared_ptr<Followers>& self) {
  EventLog& log = deps.jobs.cluster_events;
  const auto page = q.after >= 0 ? log.after(q.after, q.filter, static_cast<size_t>(q.limit))
                                 : log.newest(q.filter, static_cast<size_t>(q.limit));
  if (!page.events.empty() || q.wait_ms == 0 || page.truncated) {
    json events = json::array();
    for (const auto& e : page.events) events.push_back(event_view(deps, who, e));
    return respond(json_response(200, {{"events", events}, {"cursor", page.cursor}, {"truncated", page.truncated}}));
  }
  // A long poll: the next matching event, or nothing after wait_ms.
  const uint64_t id = next++;
  Follower& follower = open[id];
  follower.respond = std::move(respond);
  follower.who = who;
  follower.filter = q.filter;
  follower.cursor = page.cursor;
  follower.limit = q.limit;
  follower.timer = std::make_unique<boost::asio::steady_timer>(deps.io);
  std::weak_ptr<Followers> weak = self;
  follower.listener = log.listen([weak, id](const ClusterEvent& event) {
    auto f = weak.lock();
    if (!f) return;
    auto it = f->open.find(id);
    if (it != f->open.end() && it->second.filter.matches(event)) f->answer(id);
  });
  follower.timer->expires_after(std::chrono::milliseconds(q.wait_ms));
  follower.timer->async_wait([weak, id](const boost::system::error_code& ec) {
    auto f = weak.lock();
    if (!ec && f && f->alive) f->answer(id);
  });
}

}  // namespace ag::head
