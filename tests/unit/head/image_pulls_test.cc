// Pre-pulls of an image: each node's state as it reports.
#include "head/nodes/image_pulls.h"

#include <gtest/gtest.h>

namespace ag::head {
namespace {

TEST(ImagePullsTest, EachNodeEndsPulledOrFailed) {
  ImagePulls pulls;
  const std::string id = pulls.start("train:1", {"n1", "n2"}, "alice", 1000).id;
  const ImagePulls::Pull* pull = pulls.find(id);
  ASSERT_NE(pull, nullptr);
  EXPECT_EQ(pull->image, "train:1");
  EXPECT_EQ(pull->by, "alice");
  EXPECT_FALSE(pull->finished());

  pulls.update("n1", {id, "Copying blob sha256:aa", false, ""});
  EXPECT_EQ(pulls.find(id)->nodes[0].message, "Copying blob sha256:aa");
  pulls.update("n1", {id, "", true, ""});
  pulls.update("n3", {id, "", true, ""});  // not one of its nodes: ignored
  EXPECT_EQ(pulls.find(id)->nodes[0].state, "done");
  EXPECT_FALSE(pulls.find(id)->finished());
  pulls.update("n2", {id, "", true, "podman could not pull train:1: manifest unknown"});
  EXPECT_EQ(pulls.find(id)->nodes[1].state, "failed");
  EXPECT_EQ(pulls.find(id)->nodes[1].message, "podman could not pull train:1: manifest unknown");
  EXPECT_TRUE(pulls.find(id)->finished());
  pulls.update("n1", {id, "late", true, "late error"});
  EXPECT_EQ(pulls.find(id)->nodes[0].state, "done") << "an ended pull stays ended";
}

TEST(ImagePullsTest, OnlyTheLatestAreKept) {
  ImagePulls pulls;
  const std::string id = pulls.start("train:1", {"n1"}, "alice", 1000).id;
  EXPECT_NE(pulls.find(id), nullptr);
  for (size_t i = 0; i < ImagePulls::kKeptPulls; ++i) pulls.start("x:1", {"n1"}, "bob", 2000);
  EXPECT_EQ(pulls.find(id), nullptr);
  EXPECT_EQ(pulls.find("pull_nope"), nullptr);
}

}  // namespace
}  // namespace ag::head
