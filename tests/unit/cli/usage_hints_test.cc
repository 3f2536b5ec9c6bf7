// closest(): the subcommand or flag a mistyped word most likely meant, only when it is
// near enough to be a typo.
#include "cli/usage_hints.h"

#include <gtest/gtest.h>

namespace ag::cli {
namespace {

const std::vector<std::string> kCommands = {"submit", "status", "stop", "stop-job", "list-jobs", "list-nodes", "logs"};

TEST(Closest, ATypoFindsWhatWasMeant) {
  EXPECT_EQ(closest("sumbit", kCommands), "submit");
  EXPECT_EQ(closest("list-jobz", kCommands), "list-jobs");
  EXPECT_EQ(closest("log", kCommands), "logs");
  EXPECT_EQ(closest("--num-worker", {"--num-workers", "--num-cpus"}), "--num-workers");
}

TEST(Closest, AWordFarFromEveryCandidateFindsNothing) {
  EXPECT_EQ(closest("deploy", kCommands), "");
  EXPECT_EQ(closest("", {}), "");
}

}  // namespace
}  // namespace ag::cli
