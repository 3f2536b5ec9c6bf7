// Tests for the job and task states shared by the head and its clients
// (api/job_state.h): their wire names, parsing them back, and which are terminal.
#include "api/job_state.h"

#include <gtest/gtest.h>

#include <string>

namespace ag::api {
namespace {

// The names are the REST API's (GET /api/jobs/{id} "state", ?state= filters) and the
// stored records'; changing one breaks clients and old databases.
TEST(JobStateTest, WireNamesAreTheApis) {
  EXPECT_STREQ(to_string(JobState::kPending), "PENDING");
  EXPECT_STREQ(to_string(JobState::kRunning), "RUNNING");
  EXPECT_STREQ(to_string(JobState::kSucceeded), "SUCCEEDED");
  EXPECT_STREQ(to_string(JobState::kFailed), "FAILED");
  EXPECT_STREQ(to_string(JobState::kStopped), "STOPPED");
  EXPECT_STREQ(to_string(TaskState::kStarting), "STARTING");
  EXPECT_STREQ(to_string(TaskState::kRunning), "RUNNING");
  EXPECT_STREQ(to_string(TaskState::kSucceeded), "SUCCEEDED");
  EXPECT_STREQ(to_string(TaskState::kFailed), "FAILED");
  EXPECT_STREQ(to_string(TaskState::kStopped), "STOPPED");
}

TEST(JobStateTest, EveryJobStateRoundTrips) {
  for (JobState state : kJobStates) {
    EXPECT_EQ(parse_job_state(to_string(state)), state) << to_string(state);
  }
}

TEST(JobStateTest, EveryTaskStateRoundTrips) {
  for (TaskState state :
       {TaskState::kStarting, TaskState::kRunning, TaskState::kSucceeded, TaskState::kFailed, TaskState::kStopped}) {
    EXPECT_EQ(parse_task_state(to_string(state)), state) << to_string(state);
  }
}

// Callers that accept other spellings normalise first (the head's ?state= filter
// upper-cases); the parser itself matches exactly.
TEST(JobStateTest, OnlyExactNamesParse) {
  for (const char* text : {"", "succeeded", "Running", "DONE", "STARTING", " PENDING"}) {
    EXPECT_EQ(parse_job_state(text), std::nullopt) << text;
  }
  EXPECT_EQ(parse_task_state("PENDING"), std::nullopt);
  EXPECT_EQ(parse_task_state("starting"), std::nullopt);
}

TEST(JobStateTest, ParsesFromAStdString) {
  const std::string text = "FAILED";
  EXPECT_EQ(parse_job_state(text), JobState::kFailed);
}

TEST(JobStateTest, OnlySucceededFailedAndStoppedAreTerminal) {
  EXPECT_FALSE(is_terminal(JobState::kPending));
  EXPECT_FALSE(is_terminal(JobState::kRunning));
  EXPECT_TRUE(is_terminal(JobState::kSucceeded));
  EXPECT_TRUE(is_terminal(JobState::kFailed));
  EXPECT_TRUE(is_terminal(JobState::kStopped));
}

TEST(JobStateTest, JobStatesListsEachStateOnceInLifecycleOrder) {
  ASSERT_EQ(kJobStates.size(), 5u);
  EXPECT_EQ(kJobStates[0], JobState::kPending);
  EXPECT_EQ(kJobStates[1], JobState::kRunning);
  EXPECT_EQ(kJobStates[2], JobState::kSucceeded);
  EXPECT_EQ(kJobStates[3], JobState::kFailed);
  EXPECT_EQ(kJobStates[4], JobState::kStopped);
}

}  // namespace
}  // namespace ag::api
