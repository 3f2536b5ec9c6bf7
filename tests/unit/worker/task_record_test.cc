// TaskRecord: what launch writes is what recovery reads, field for field; a record cut
// short or of another shape is refused (its folder is then removed); a record without
// a field keeps that field's default.
#include "worker/task_record.h"

#include <gtest/gtest.h>

namespace ag::worker {
namespace {

TEST(TaskRecordTest, WhatLaunchWritesRecoveryReadsFieldForField) {
  const TaskRecord record{api::TaskKey{"job_0123456789ab", 2, 7},
                          "job_0123456789ab.2.7.a1b2c3d4",
                          "/sys/fs/cgroup/aethergrid/node_1/job_0123456789ab.2.7",
                          {"/sys/fs/cgroup/memory/aethergrid/x", "/sys/fs/cgroup/cpu/aethergrid/x"},
                          int64_t{8} << 30,
                          "ag-job_0123456789ab-2-7",
                          "/usr/bin/podman",
                          "aethergrid-node_1.slice",
                          4242,
                          4343};
  auto back = decode_task_record(encode_task_record(record));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, record);
}

TEST(TaskRecordTest, ARecordCutShortOrOfAnotherShapeIsRefused) {
  const std::string whole = encode_task_record(TaskRecord{api::TaskKey{"job_a", 0, 0}});
  EXPECT_FALSE(decode_task_record(whole.substr(0, whole.size() / 2)));
  EXPECT_FALSE(decode_task_record(""));
  EXPECT_FALSE(decode_task_record("[1, 2]"));
  EXPECT_FALSE(decode_task_record(R"({"job_id": 12})"));
}

TEST(TaskRecordTest, AMissingFieldKeepsItsDefault) {
  auto record = decode_task_record(R"({"job_id": "job_a", "attempt": 1, "task_index": 3, "pid": 99})");
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->id, (api::TaskKey{"job_a", 1, 3}));
  EXPECT_EQ(record->pid, 99);
  EXPECT_EQ(record->supervisor_pid, 0);
  EXPECT_TRUE(record->container.empty());
}

}  // namespace
}  // namespace ag::worker
