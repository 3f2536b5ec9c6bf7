// The Prometheus pieces that stand alone: histogram rendering and route templating.
#include "head/dashboard/metrics.h"

#include <gtest/gtest.h>

namespace ag::head::dashboard {
namespace {

TEST(Histogram, RendersCumulativeBucketsSumAndCount) {
  Histogram h({0.1, 1});
  h.observe(0.0625);
  h.observe(0.5);
  h.observe(1);  // on a bound: counted in that bucket (le = less or equal)
  h.observe(7);
  std::string out;
  h.render("x_seconds", out);
  EXPECT_EQ(out,
            "x_seconds_bucket{le=\"0.1\"} 1\n"
            "x_seconds_bucket{le=\"1\"} 3\n"
            "x_seconds_bucket{le=\"+Inf\"} 4\n"
            "x_seconds_sum 8.5625\n"
            "x_seconds_count 4\n");
  EXPECT_EQ(h.count(), 4u);
}

TEST(RouteTemplate, ReplacesIdsSoLabelsStayBounded) {
  EXPECT_EQ(route_template("/api/jobs"), "/api/jobs");
  EXPECT_EQ(route_template("/api/jobs/batch"), "/api/jobs/batch");
  EXPECT_EQ(route_template("/api/jobs/job_0123456789ab"), "/api/jobs/{id}");
  EXPECT_EQ(route_template("/api/jobs/job_0123456789ab/logs"), "/api/jobs/{id}/logs");
  EXPECT_EQ(route_template("/api/jobs/job_0123456789ab/stop"), "/api/jobs/{id}/stop");
  EXPECT_EQ(route_template("/api/jobs/job_0123456789ab/whatever"), "other");
  EXPECT_EQ(route_template("/api/nodes/node_1"), "/api/nodes/{id}");
  EXPECT_EQ(route_template("/api/packages/abc"), "/api/packages/{hash}");
  EXPECT_EQ(route_template("/assets/pages/job.js"), "/assets/{file}");
  EXPECT_EQ(route_template("/metrics"), "/metrics");
  EXPECT_EQ(route_template("/"), "/");
  EXPECT_EQ(route_template("/no/such/thing/" + std::string(100, 'x')), "other");
}

}  // namespace
}  // namespace ag::head::dashboard
