// closest(): the subcommand or flag a mistyped word most likely meant, only when it is
// near enough to be a typo; plain_value_error() and in_cli_terms(): a parser's or the
// head's message in the flag's own terms.
#include "cli/usage_hints.h"

#include <gtest/gtest.h>

#include "cli/api_client.h"

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

TEST(MeantCommand, WhatOtherSchedulersCallItThenTypos) {
  EXPECT_EQ(meant_command("cancel", kCommands), "stop-job");
  EXPECT_EQ(meant_command("scancel", kCommands), "stop-job");
  EXPECT_EQ(meant_command("squeue", kCommands), "list-jobs");
  EXPECT_EQ(meant_command("sbatch", kCommands), "submit");
  EXPECT_EQ(meant_command("sumbit", kCommands), "submit");
  EXPECT_EQ(meant_command("deploy", kCommands), "");
  // A synonym whose command this program lacks finds nothing by it.
  EXPECT_EQ(meant_command("nodes", {"submit"}), "");
}

TEST(PlainValueError, SaysWhatIsWrongWithTheValueAndWhatToGive) {
  EXPECT_EQ(plain_value_error("--num-workers: Value abc not in range 1 to 4096"),
            "--num-workers: 'abc' is not a whole number; give one from 1 to 4096");
  EXPECT_EQ(plain_value_error("--num-workers: Value 2.5 not in range 1 to 4096"),
            "--num-workers: '2.5' is not a whole number; give one from 1 to 4096");
  EXPECT_EQ(plain_value_error("--num-workers: Value 5000 not in range 1 to 4096"),
            "--num-workers: 5000 is out of range; give a whole number from 1 to 4096");
  EXPECT_EQ(plain_value_error("--num-cpus: Value x not in range 0.000000 to 1024.000000"),
            "--num-cpus: 'x' is not a number; give one from 0 to 1024");
  EXPECT_EQ(plain_value_error("--num-cpus: Value -1 not in range 0.000000 to 1024.000000"),
            "--num-cpus: -1 is out of range; give a number from 0 to 1024");
  // Anything else is left as the parser said it.
  EXPECT_EQ(plain_value_error("The following argument was not expected: --bogus"),
            "The following argument was not expected: --bogus");
}

TEST(InCliTermsTest, AQueryParameterTheHeadNamesBecomesTheFlag) {
  EXPECT_EQ(in_cli_terms("query parameter 'task_index' must be a whole number between 0 and 1, got '5'"),
            "--task-index: the job has tasks 0-1 (got 5)");
  EXPECT_EQ(in_cli_terms("query parameter 'max_bytes' must be a whole number between 1 and 4194304, got 'x'"),
            "--max-bytes: give a whole number from 1 to 4194304 (got x)");
  EXPECT_EQ(in_cli_terms("no job with id 'job_x'"), "no job with id 'job_x'");
}

}  // namespace
}  // namespace ag::cli
