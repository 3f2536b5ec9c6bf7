// Webhooks' pure parts: URLs, which events a webhook wants, and the signature.
#include "head/webhooks/webhook.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "head/webhooks/webhook_payload.h"

namespace ag::head {
namespace {

TEST(WebhookUrlTest, ReadsSchemeHostPortAndPath) {
  auto t = parse_webhook_url("https://hooks.example.com/services/T0/B1?x=1", "");
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(t->endpoint.host, "hooks.example.com");
  EXPECT_EQ(t->endpoint.port, 443);
  EXPECT_TRUE(t->endpoint.service_tls);
  EXPECT_EQ(t->target, "/services/T0/B1?x=1");
  t = parse_webhook_url("http://127.0.0.1:8080", "");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->endpoint.host, "127.0.0.1");
  EXPECT_EQ(t->endpoint.port, 8080);
  EXPECT_FALSE(t->endpoint.tls());
  EXPECT_EQ(t->target, "/");
  t = parse_webhook_url("http://[::1]:9000/h#frag", "");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->endpoint.host, "::1");
  EXPECT_EQ(t->endpoint.port, 9000);
  EXPECT_EQ(t->target, "/h");
}

TEST(WebhookUrlTest, RefusesWhatCannotBeSentToWithTheReason) {
  const std::pair<const char*, const char*> bad[] = {
      {"ftp://x/", "must start with http:// or https://"},
      {"hooks.example.com/x", "must start with http:// or https://"},
      {"http://:80/", "names no host"},
      {"http://h:0/", "port must be a number"},
      {"http://h:70000/", "port must be a number"},
      {"http://h:/", "port must be a number"},
      {"http://user:pw@h/", "credentials in the URL"},
      {"http://h/a b", "spaces"},
      {"http://[::1/", "closing ]"},
  };
  for (const auto& [url, why] : bad) {
    auto t = parse_webhook_url(url, "");
    ASSERT_FALSE(t.ok()) << url;
    EXPECT_NE(t.error().message.find(why), std::string::npos) << url << ": " << t.error().message;
  }
  EXPECT_FALSE(parse_webhook_url("http://h/", "-----BEGIN CERTIFICATE-----").ok());
}

TEST(WebhookTest, WantsItsTypesOfItsOwnersJobsOrEverythingWithAll) {
  Webhook mine;
  mine.events = {"job.failed"};
  mine.jobs_of = "alice";
  ClusterEvent failed{1, 0, "job.failed", "j1", "", "alice", "m"};
  EXPECT_TRUE(mine.wants(failed));
  failed.owner = "bob";
  EXPECT_FALSE(mine.wants(failed));
  ClusterEvent dead{2, 0, "node.dead", "", "node_a", "", "m"};
  mine.events.insert("node.dead");
  EXPECT_FALSE(mine.wants(dead));
  Webhook every = mine;
  every.all = true;
  EXPECT_TRUE(every.wants(dead));
  EXPECT_TRUE(every.wants(failed));
  failed.type = "job.update";
  EXPECT_FALSE(every.wants(failed));
}

TEST(WebhookTest, SignsWithHmacSha256) {
  // RFC 4231, test case 2.
  EXPECT_EQ(webhook_signature("Jefe", "what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(WebhookTest, StoredFormRoundTrips) {
  Webhook w;
  w.id = "wh_1";
  w.url = "https://h/x";
  w.owner = "alice";
  w.jobs_of = "alice";
  w.events = {"job.failed", "job.stopped"};
  w.format = WebhookFormat::kSlack;
  w.secret = "agw_s";
  w.retry_for_ms = 60000;
  auto back = webhook_from_json(webhook_to_json(w, true));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->events, w.events);
  EXPECT_EQ(back->format, WebhookFormat::kSlack);
  EXPECT_EQ(back->secret, "agw_s");
  EXPECT_EQ(back->retry_for_ms, 60000);
  EXPECT_EQ(webhook_to_json(w, false).count("secret"), 0u);
}

}  // namespace
}  // namespace ag::head
