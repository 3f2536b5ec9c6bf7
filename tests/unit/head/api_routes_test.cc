// The REST routes as a table. RouteTable alone: a literal segment beats a parameter
// whatever the order routes were added in, a path some route takes with another method
// is a 405 naming the methods, anything else a 404, and a route added twice is refused.
// The API's own table: every route with the access it needs, as listed here (a change
// of who may call what shows in this file), and requests through ApiRoutes::handle over
// real head parts (memory store, fake clock): 401, 403 per role, 404, 405, a job's
// owner, a submission id standing for its job.
#include "head/rest/api_routes.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "fakes/fake_clock.h"
#include "fakes/fake_worker_channel.h"
#include "head/dashboard/event_hub.h"
#include "head/dashboard/metrics.h"
#include "head/store/memory_store.h"

namespace ag::head {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

Handler named(std::string* called, const std::string& name) {
  return [called, name](const Call&, net::Respond) { *called = name; };
}

TEST(RouteTableTest, ALiteralSegmentBeatsAParameterWhateverTheOrder) {
  std::string called;
  RouteTable table;
  table.add({"GET", "/api/jobs/{job}", Access::kUser, "", named(&called, "job")});
  table.add({"POST", "/api/jobs/batch", Access::kSubmitter, "submit jobs", named(&called, "batch")});
  table.add({"POST", "/api/jobs/{job}/stop", Access::kJobOwner, "stop it", named(&called, "stop")});

  auto found = table.find("POST", "/api/jobs/batch");
  ASSERT_EQ(found.kind, RouteTable::Match::Kind::kFound);
  EXPECT_EQ(found.route->pattern, "/api/jobs/batch");
  found = table.find("GET", "/api/jobs/job_0123");
  ASSERT_EQ(found.kind, RouteTable::Match::Kind::kFound);
  EXPECT_EQ(found.params.at("job"), "job_0123");
  // GET of the literal path is the literal route's 405, not a job named "batch".
  found = table.find("GET", "/api/jobs/batch");
  EXPECT_EQ(found.kind, RouteTable::Match::Kind::kMethodNotAllowed);
  EXPECT_EQ(found.allowed, std::vector<std::string>{"POST"});
  found = table.find("GET", "/api/jobs/job_0123/stop");
  EXPECT_EQ(found.kind, RouteTable::Match::Kind::kMethodNotAllowed);
}

TEST(RouteTableTest, UnknownPathsEmptySegmentsAndTwiceAddedRoutes) {
  std::string called;
  RouteTable table;
  table.add({"GET", "/api/users/{name}", Access::kAdmin, "managing users", named(&called, "user")});
  EXPECT_EQ(table.find("GET", "/api/users/").kind, RouteTable::Match::Kind::kNoRoute) << "a parameter is never empty";
  EXPECT_EQ(table.find("GET", "/api/users/bob/extra").kind, RouteTable::Match::Kind::kNoRoute);
  EXPECT_EQ(table.find("GET", "/api/nothing").kind, RouteTable::Match::Kind::kNoRoute);
  EXPECT_EQ(table.find("GET", "").kind, RouteTable::Match::Kind::kNoRoute);
  EXPECT_THROW(table.add({"GET", "/api/users/{other}", Access::kUser, "", named(&called, "again")}), std::logic_error);
  table.add({"DELETE", "/api/users/{other}", Access::kAdmin, "managing users", named(&called, "delete")});
  auto found = table.find("PUT", "/api/users/bob");
  ASSERT_EQ(found.kind, RouteTable::Match::Kind::kMethodNotAllowed);
  EXPECT_EQ(found.allowed, (std::vector<std::string>{"GET", "DELETE"}));
}

class ApiRoutesTest : public ::testing::Test {
 protected:
  ApiRoutesTest()
      : dir_(fs::temp_directory_path() / ("ag-routes-test-" + std::to_string(::getpid()) + "-" +
                                          ::testing::UnitTest::GetInstance()->current_test_info()->name())),
        logs_((dir_ / "logs").string()),
        jobs_({clock_, store_, nodes_, channel_, logs_, clock_}, JobConfig{}),
        audit_(store_, jobs_.table),
        gateway_({clock_, nodes_, jobs_, logs_, clock_, access_, audit_}, WorkerGatewayConfig{}),
        packages_((dir_ / "packages").string(), 1 << 20),
        metrics_({jobs_, nodes_, logs_, store_, role_}),
        hub_({io_, jobs_, nodes_, clock_}),
        dashboard_({access_, audit_, clock_, metrics_, hub_}),
        webhooks_(store_, clock_),
        deliveries_({clock_, clock_, jobs_.cluster_events, webhooks_, jobs_, nodes_, "https://127.0.0.1:8265"}),
        routes_({io_, jobs_, nodes_, logs_, packages_, access_, audit_, gateway_, clock_, dashboard_, pulls_, role_,
                 stacks_, webhooks_, deliveries_}) {
    EXPECT_TRUE(access_.bootstrap(kAdmin, std::nullopt).ok());
    for (auto [name, role] : {std::pair{"alice", Role::kUser}, {"bob", Role::kUser}, {"vera", Role::kViewer}}) {
      access_.add_user({name, role}, [this, name](Result<std::string> token) { tokens_[name] = token.value(); });
    }
    access_.issue_node_credential("node_a", [this](Result<std::string> token) { tokens_["node_a"] = token.value(); });
    Node node;
    node.node_id = "node_a";
    node.total.cpu_millis = 4000;
    node.total.memory_bytes = int64_t{8} << 30;
    node.state = NodeState::kAlive;
    nodes_.upsert(node);
    clock_.run_ready();
  }
  ~ApiRoutesTest() override { fs::remove_all(dir_); }

  // The answer to `method path` with `caller`'s token ("" for none).
  net::HttpResponse call(const std::string& caller, const std::string& method, const std::string& path,
                         const std::string& body = "") {
    net::HttpRequest req;
    req.method = method;
    req.target = path;
    req.path = path.substr(0, path.find('?'));
    if (auto q = path.find('?'); q != std::string::npos) {
      const std::string pair = path.substr(q + 1);  // one NAME=VALUE is all these tests send
      req.query[pair.substr(0, pair.find('='))] = pair.substr(pair.find('=') + 1);
    }
    req.body = body;
    req.remote_address = "127.0.0.1";
    if (!caller.empty()) req.headers["authorization"] = "Bearer " + (caller == "admin" ? kAdmin : tokens_[caller]);
    std::optional<net::HttpResponse> answer;
    routes_.handle(req, [&](net::HttpResponse res) { answer = std::move(res); });
    clock_.run_ready();
    EXPECT_TRUE(answer.has_value()) << method << " " << path << " was not answered";
    return answer.value_or(net::HttpResponse{0, "", ""});
  }

  static std::string error_of(const net::HttpResponse& res) {
    auto doc = nlohmann::json::parse(res.body, nullptr, false);
    return doc.is_object() && doc.contains("error") ? doc["error"].get<std::string>() : "";
  }

  std::string submit(const std::string& caller, const std::string& extra = "") {
    auto res = call(caller, "POST", "/api/jobs",
                    R"({"entrypoint": "python train.py", "num_workers": 1)" + extra + "}");
    EXPECT_EQ(res.status, 201) << res.body;
    return nlohmann::json::parse(res.body).value("job_id", "");
  }

  const std::string kAdmin = "agu_admin-token";
  fs::path dir_;
  testing::FakeClock clock_;
  store::MemoryStore store_;
  HeadRole role_{"127.0.0.1:6379"};
  NodeRegistry nodes_;
  testing::FakeWorkerChannel channel_;
  LogStore logs_;
  JobLayer jobs_;
  AccessControl access_{{store_, clock_, clock_}};
  AuditLog audit_;
  WorkerGateway gateway_;
  PackageStore packages_;
  boost::asio::io_context io_;
  dashboard::Metrics metrics_;
  dashboard::EventHub hub_;
  dashboard::DashboardRoutes dashboard_;
  ImagePulls pulls_;
  StackTaker stacks_{clock_, channel_};
  WebhookStore webhooks_;
  WebhookDispatcher deliveries_;
  ApiRoutes routes_;
  std::map<std::string, std::string> tokens_;
};

TEST_F(ApiRoutesTest, EveryRouteNeedsTheAccessListedHere) {
  const std::map<std::string, Access> expected = {
      {"GET /api/cluster", Access::kUser},
      {"GET /api/nodes", Access::kUser},
      {"GET /api/nodes/{node}", Access::kUser},
      {"DELETE /api/nodes/{node}", Access::kAdmin},
      {"POST /api/nodes/{node}/drain", Access::kAdmin},
      {"POST /api/nodes/{node}/resume", Access::kAdmin},
      {"GET /api/events", Access::kUser},
      {"GET /api/webhooks", Access::kUser},
      {"POST /api/webhooks", Access::kSubmitter},
      {"DELETE /api/webhooks/{id}", Access::kSubmitter},
      {"POST /api/webhooks/{id}/test", Access::kSubmitter},
      {"GET /api/webhooks/{id}/deliveries", Access::kUser},
      {"GET /api/whoami", Access::kUser},
      {"GET /api/version", Access::kUser},
      {"GET /api/jobs", Access::kUser},
      {"POST /api/jobs", Access::kSubmitter},
      {"POST /api/jobs/batch", Access::kSubmitter},
      {"GET /api/jobs/{job}", Access::kUser},
      {"DELETE /api/jobs/{job}", Access::kJobOwner},
      {"GET /api/jobs/{job}/events", Access::kUser},
      {"POST /api/jobs/{job}/stop", Access::kJobOwner},
      {"POST /api/jobs/{job}/hold", Access::kJobOwner},
      {"POST /api/jobs/{job}/release", Access::kJobOwner},
      {"GET /api/jobs/{job}/logs", Access::kJobOwner},
      {"GET /api/jobs/{job}/lines", Access::kJobOwner},
      {"GET /api/jobs/{job}/usage", Access::kUser},
      {"GET /api/jobs/{job}/wait", Access::kUser},
      {"GET /api/quotas", Access::kUser},
      {"PUT /api/quotas/users/{name}", Access::kAdmin},
      {"DELETE /api/quotas/users/{name}", Access::kAdmin},
      {"PUT /api/quotas/groups/{name}", Access::kAdmin},
      {"DELETE /api/quotas/groups/{name}", Access::kAdmin},
      {"GET /api/share", Access::kUser},
      {"GET /api/queues", Access::kUser},
      {"PUT /api/queues/{name}", Access::kAdmin},
      {"DELETE /api/queues/{name}", Access::kAdmin},
      {"POST /api/jobs/{job}/stacks", Access::kJobOwner},
      {"GET /api/packages", Access::kUser},
      {"HEAD /api/packages/{hash}", Access::kPackageReader},
      {"GET /api/packages/{hash}", Access::kPackageReader},
      {"PUT /api/packages/{hash}", Access::kPackageReader},
      {"POST /api/images/pull", Access::kSubmitter},
      {"GET /api/images/pulls/{pull}", Access::kUser},
      {"GET /api/users", Access::kAdmin},
      {"POST /api/users", Access::kAdmin},
      {"GET /api/users/{name}", Access::kAdmin},
      {"PATCH /api/users/{name}", Access::kAdmin},
      {"DELETE /api/users/{name}", Access::kAdmin},
      {"POST /api/users/{name}/rotate", Access::kSelfOrAdmin},
      {"POST /api/users/{name}/disable", Access::kAdmin},
      {"POST /api/users/{name}/enable", Access::kAdmin},
      {"GET /api/tokens", Access::kAdmin},
      {"POST /api/tokens", Access::kAdmin},
      {"DELETE /api/tokens/{token}", Access::kAdmin},
      {"GET /api/audit", Access::kAdmin},
  };
  std::map<std::string, Access> actual;
  for (const auto& route : routes_.table().routes()) {
    actual[route.method + " " + route.pattern] = route.access;
    // A refusal says what was refused.
    if (route.access != Access::kUser) {
      EXPECT_FALSE(route.what.empty()) << route.method << " " << route.pattern;
    }
  }
  EXPECT_EQ(actual.size(), expected.size());
  for (const auto& [route, access] : expected) {
    auto it = actual.find(route);
    ASSERT_NE(it, actual.end()) << route << " is not in the table";
    EXPECT_STREQ(to_string(it->second), to_string(access)) << route;
  }
}

TEST_F(ApiRoutesTest, EachRoleIsRefusedWhatItMayNotDoAndToldHow) {
  EXPECT_EQ(call("", "GET", "/api/jobs").status, 401);
  auto res = call("vera", "POST", "/api/jobs", R"({"entrypoint": "x"})");
  EXPECT_EQ(res.status, 403);
  EXPECT_EQ(error_of(res), "user vera is a viewer: viewers cannot submit jobs");
  EXPECT_EQ(call("vera", "GET", "/api/jobs").status, 200);
  res = call("alice", "GET", "/api/users");
  EXPECT_EQ(res.status, 403);
  EXPECT_THAT(error_of(res), HasSubstr("managing users: only an admin can do this"));
  EXPECT_EQ(call("admin", "GET", "/api/users").status, 200);
  // Anyone may rotate their own token, nobody else's but an admin.
  EXPECT_EQ(call("alice", "POST", "/api/users/alice/rotate").status, 200);
  EXPECT_EQ(call("bob", "POST", "/api/users/alice/rotate").status, 403);
  // A node's credential fetches packages and nothing else; a viewer reads no package.
  res = call("node_a", "GET", "/api/jobs");
  EXPECT_EQ(res.status, 403);
  EXPECT_THAT(error_of(res), HasSubstr("can only speak the worker protocol and fetch packages"));
  EXPECT_EQ(call("node_a", "HEAD", "/api/packages/" + std::string(64, 'a')).status, 404);
  EXPECT_EQ(call("vera", "HEAD", "/api/packages/" + std::string(64, 'a')).status, 403);
  EXPECT_EQ(call("bob", "GET", "/api/packages/nothex").status, 400);
}

TEST_F(ApiRoutesTest, UnknownRoutesAre404AndOtherMethods405) {
  auto res = call("alice", "GET", "/api/nope");
  EXPECT_EQ(res.status, 404);
  EXPECT_EQ(error_of(res), "no route for GET /api/nope");
  res = call("alice", "DELETE", "/api/jobs");
  EXPECT_EQ(res.status, 405);
  EXPECT_EQ(error_of(res), "use GET or POST for /api/jobs");
  res = call("alice", "GET", "/api/jobs/batch");
  EXPECT_EQ(res.status, 405) << "not a job named batch";
  res = call("alice", "GET", "/api/jobs/job_nope");
  EXPECT_EQ(res.status, 404);
  EXPECT_EQ(error_of(res), "no job with id 'job_nope'; list jobs with `ag list-jobs`");
  EXPECT_EQ(call("admin", "PUT", "/api/queues/").status, 405) << "a trailing slash is no part of the path";
  EXPECT_EQ(call("alice", "GET", "/api/queues/").status, 200);
  EXPECT_EQ(call("alice", "GET", "/api/queues//").status, 404);
}

TEST_F(ApiRoutesTest, OnlyAJobsOwnerStopsItAndTheirSubmissionIdStandsForIt) {
  const std::string id = submit("alice", R"(, "submission_id": "nightly")");
  ASSERT_FALSE(id.empty());
  auto res = call("bob", "POST", "/api/jobs/" + id + "/stop");
  EXPECT_EQ(res.status, 403);
  EXPECT_EQ(error_of(res), "job " + id + " belongs to alice; only its owner, members of the owner's groups and "
                                         "admins can stop it");
  EXPECT_EQ(call("bob", "GET", "/api/jobs/" + id).status, 200) << "anyone reads a job's status";
  EXPECT_EQ(call("bob", "GET", "/api/jobs/" + id + "/logs?task_index=0").status, 403);
  EXPECT_EQ(call("bob", "GET", "/api/jobs/nightly").status, 404) << "submission ids are per owner";
  res = call("alice", "POST", "/api/jobs/nightly/stop");
  EXPECT_EQ(res.status, 200) << res.body;
  EXPECT_EQ(nlohmann::json::parse(res.body)["job_id"], id);
}

// `ag wait` then `ag events`: the job's end is shown once stored, a few ms after its
// state, so a listing waits for what happened before it (at most 2 s, for a store that
// does not answer).
TEST_F(ApiRoutesTest, AnEventListingWaitsForTheEventsBeforeItToBeStored) {
  const auto list = [this] {
    net::HttpRequest req;
    req.method = "GET";
    req.target = req.path = "/api/events";
    req.remote_address = "127.0.0.1";
    req.headers["authorization"] = "Bearer " + tokens_["alice"];
    auto answer = std::make_shared<std::optional<net::HttpResponse>>();
    routes_.handle(req, [answer](net::HttpResponse res) { *answer = std::move(res); });
    clock_.run_ready();
    return answer;
  };
  const auto types = [](const net::HttpResponse& res) {
    std::vector<std::string> out;
    const auto doc = nlohmann::json::parse(res.body);
    for (const auto& e : doc["events"]) out.push_back(e["type"]);
    return out;
  };
  ClusterEvent end;
  end.type = "job.succeeded";
  end.job_id = "job_x";
  end.owner = "alice";
  const int64_t seq = jobs_.cluster_events.append_unstored(end).seq;
  auto answer = list();
  EXPECT_FALSE(answer->has_value());
  jobs_.cluster_events.stored_upto(seq);
  ASSERT_TRUE(answer->has_value());
  EXPECT_EQ(types(**answer), std::vector<std::string>{"job.succeeded"});

  // A store that does not answer: what is shown, after 2 s.
  end.type = "job.failed";
  jobs_.cluster_events.append_unstored(end);
  answer = list();
  EXPECT_FALSE(answer->has_value());
  io_.run_for(std::chrono::milliseconds(2500));
  ASSERT_TRUE(answer->has_value());
  EXPECT_EQ(answer->value().status, 200);
  EXPECT_EQ(types(**answer), std::vector<std::string>{"job.succeeded"});
  // It waits no more: storing the event later answers nobody twice.
  answer->reset();
  jobs_.cluster_events.stored_upto(jobs_.cluster_events.appended_seq());
  EXPECT_FALSE(answer->has_value());
}

}  // namespace
}  // namespace ag::head
