// What jobs may ask of containers: image references and mounts.
#include "api/container_spec.h"

#include <gtest/gtest.h>

namespace ag::api {
namespace {

TEST(ImageReferenceTest, TakesWhatEnginesTake) {
  for (const char* ok : {"debian", "python:3.11", "docker.io/library/python:3.11-slim", "localhost/x:1",
                         "registry.example:5000/team/train:1.4", "ghcr.io/a/b/c__d:v1.0_rc-2",
                         "x@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                         "x:1@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}) {
    EXPECT_EQ(image_reference_problem(ok), "") << ok;
  }
}

TEST(ImageReferenceTest, RefusesWhatEnginesRefuseSayingWhy) {
  EXPECT_NE(image_reference_problem("").find("is empty"), std::string::npos);
  EXPECT_NE(image_reference_problem("Ubuntu").find("malformed name part 'Ubuntu'"), std::string::npos);
  EXPECT_NE(image_reference_problem("a b").find("space"), std::string::npos);
  EXPECT_NE(image_reference_problem("-x").find("starts with '-'"), std::string::npos);
  EXPECT_NE(image_reference_problem("x:").find("malformed tag"), std::string::npos);
  EXPECT_NE(image_reference_problem("x:.a").find("malformed tag"), std::string::npos);
  EXPECT_NE(image_reference_problem("x@sha256:12").find("malformed digest"), std::string::npos);
  EXPECT_NE(image_reference_problem("a//b").find("malformed name part ''"), std::string::npos);
  EXPECT_NE(image_reference_problem("a..b").find("malformed name part"), std::string::npos);
  EXPECT_NE(image_reference_problem("reg_istry.example/x").find("malformed registry"), std::string::npos);
  EXPECT_NE(image_reference_problem(std::string(600, 'a')).find("at most 512"), std::string::npos);
}

TEST(MountPathTest, AbsolutePlainPathsOnly) {
  EXPECT_EQ(mount_path_problem("/data/imagenet"), "");
  EXPECT_EQ(mount_path_problem("/"), "");
  EXPECT_NE(mount_path_problem("data").find("not an absolute path"), std::string::npos);
  EXPECT_NE(mount_path_problem("/a/../b").find("'..' part"), std::string::npos);
  EXPECT_NE(mount_path_problem("/a/./b").find("'.' part"), std::string::npos);
  EXPECT_NE(mount_path_problem("/a,b").find("','"), std::string::npos);
  EXPECT_NE(mount_path_problem("/a:b").find("':'"), std::string::npos);
  EXPECT_NE(mount_path_problem("").find("is empty"), std::string::npos);
}

TEST(MountsTest, TargetsAreDistinctAndNeverTheRoot) {
  EXPECT_EQ(mounts_problem({{"/a", "/data", true}, {"/b", "/scratch", false}}), "");
  EXPECT_NE(mounts_problem({{"/a", "/data", true}, {"/b", "/data/", false}}).find("mounted twice"), std::string::npos);
  EXPECT_NE(mounts_problem({{"/a", "/", true}}).find("hide the whole image"), std::string::npos);
}

TEST(AllowedPrefixTest, WholePartsOnly) {
  const std::vector<std::string> allowed = {"/data", "/nfs/"};
  EXPECT_EQ(allowing_prefix("/data", allowed), "/data");
  EXPECT_EQ(allowing_prefix("/data/imagenet", allowed), "/data");
  EXPECT_EQ(allowing_prefix("/nfs/x", allowed), "/nfs/");
  EXPECT_FALSE(allowing_prefix("/database", allowed).has_value());
  EXPECT_FALSE(allowing_prefix("/etc", allowed).has_value());
  EXPECT_FALSE(allowing_prefix("/data", {}).has_value());
}

}  // namespace
}  // namespace ag::api
