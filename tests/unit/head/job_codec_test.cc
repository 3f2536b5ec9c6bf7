// The job codec's stored form: job_record_text (written without a JSON tree) writes the
// same bytes as job_to_json(job).dump(), for a job with every field set, strings that
// need escapes, unicode and random jobs, with the spec's text kept or not; what it
// writes decodes (job_from_json) to the same job; and a string that is not UTF-8 is
// refused as dump() refuses it.
#include "head/jobs/job_codec.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

namespace ag::head {
namespace {

using nlohmann::json;

// Every byte that needs an escape (but NUL, which a spec refuses), ASCII around them,
// and 2-, 3- and 4-byte UTF-8.
std::string tricky(const std::string& tag) {
  std::string text = tag + ": \"quoted\" back\\slash /slash\x7f";
  for (int c = 1; c < 0x20; ++c) text += static_cast<char>(c);
  text += " caf\xc3\xa9 \xe2\x82\xac \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x9a\x80 \xef\xbf\xbf \xf4\x8f\xbf\xbf";
  return text;
}

// What a spec's one-line fields take: no control characters, but quotes, backslashes
// and UTF-8.
std::string one_line(const std::string& tag) { return tag + " \"q\" \\ / caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x9a\x80"; }

api::JobSpec full_spec() {
  api::JobSpec spec;
  spec.entrypoint = tricky("entrypoint");
  spec.num_workers = 3;
  spec.num_cpus = 2.5;
  spec.num_gpus = 4;
  spec.memory_bytes = int64_t{48} << 30;
  spec.gpu_isolation = true;
  spec.runtime_env.env_vars = {{"A", tricky("a")}, {"Z\"", "z"}, {"\xc3\xa9t\xc3\xa9", ""}};
  spec.runtime_env.working_dir = "sha256:" + std::string(64, 'a');
  spec.runtime_env.python_executable = "/usr/bin/python3";
  spec.runtime_env.image = "docker.io/library/python:3.11";
  spec.runtime_env.mounts = {{"/data", "/mnt/data", true}, {"/scratch", "/scratch", false}};
  spec.runtime_env.excludes = {"*.pyc", one_line("exclude")};
  spec.name = one_line("name");
  spec.labels = {{"team", "vision"}, {"b.c/d", "x.y_z-1"}};
  spec.max_retries = 2;
  spec.priority = -7;
  spec.priority_set = true;
  spec.retry_delay_s = 0.1;
  spec.retry_on.kind = api::RetryOn::Kind::kExitCodes;
  spec.retry_on.exit_codes = {1, 137};
  spec.timeout_s = 3600.25;
  spec.timeout_per_attempt = true;
  spec.hang_timeout_s = 1.5;
  // allocation stays false: an allocation takes no hang_timeout.
  spec.interactive = true;
  spec.fail_on_hang = true;
  spec.requeue_on_unhealthy = true;
  spec.idle_gpu_timeout_s = 86400.125;
  spec.stop_on_idle = true;
  spec.hold_on_failure_s = 600;
  spec.placement = api::Placement::kSpread;
  spec.submission_id = "sub-1";
  spec.constraints = {{"zone", "a"}};
  spec.allow_unschedulable = true;
  spec.after = {"job_000000000001"};
  spec.after_any = {"job_000000000002"};
  spec.after_failed = {"job_000000000003"};
  spec.hold = true;
  spec.begin_ms = 1'700'000'000'000;
  spec.exclusive = true;
  spec.queue = "research";
  spec.no_preempt = true;
  spec.array = api::ArraySpec{{0, 1, 5}, 2};
  return spec;
}

TaskRecord task(int index, TaskState state) {
  TaskRecord t;
  t.index = index;
  t.node_id = "node_" + std::to_string(index);
  t.node_address = "10.0.0." + std::to_string(index + 1);
  t.gpu_ids = {index * 2, index * 2 + 1};
  t.state = state;
  t.pid = std::numeric_limits<int64_t>::max();
  t.exit_code = -1;
  t.signal = 9;
  t.reason = tricky("reason");
  t.started_ms = 1000 + index;
  t.finished_ms = 2000 + index;
  return t;
}

Job full_job() {
  Job job;
  job.id = "job_0123456789ab_5";
  job.spec = full_spec();
  job.owner = tricky("owner");
  job.submitted_from = "10.1.2.3";
  job.state = JobState::kFailed;
  job.message = tricky("message") + std::string(1, '\0');
  job.pending_kind = sched::PendingKind::kWaitingBehind;
  AttemptRecord first;
  first.number = 0;
  first.master_addr = "10.0.0.1";
  first.master_port = 29500;
  first.tasks = {task(0, TaskState::kFailed), task(1, TaskState::kStopped)};
  first.tasks[1].exit_code.reset();
  first.started_ms = 1000;
  first.finished_ms = 3000;
  first.ending = true;
  first.failure_reason = tricky("failure");
  first.failed_task = 0;
  first.failure_tail = tricky("tail") + "\nline 2\n";
  first.failure_exit_code = 137;
  first.failure_node_lost = true;
  first.preempted = true;
  first.held_until_ms = 9000;
  AttemptRecord second;
  second.number = 1;
  second.tasks = {task(0, TaskState::kRunning), task(1, TaskState::kStarting), task(2, TaskState::kSucceeded)};
  second.tasks[2].signal.reset();
  job.attempts = {first, second};
  job.submitted_ms = 500;
  job.started_ms = 1000;
  job.finished_ms = 4000;
  job.stop_requested = true;
  job.timed_out = true;
  job.queue_seq = std::numeric_limits<uint64_t>::max();
  job.retry_at_ms = -5;
  job.held_by = tricky("holder");
  job.array_id = "job_0123456789ab";
  job.array_index = 5;
  return job;
}

// The new encoder writes what the tree's dump() writes, with and without the spec's
// text kept, and what it writes decodes to the same job.
void expect_same_record(Job job) {
  const std::string old_text = job_to_json(job).dump();
  job.spec_text = nullptr;
  EXPECT_EQ(job_record_text(job), old_text);
  job.spec_text = make_spec_text(job.spec);
  const std::string new_text = job_record_text(job);
  EXPECT_EQ(new_text, old_text);
  EXPECT_EQ(json::parse(new_text), job_to_json(job));
  auto decoded = job_from_json(json::parse(new_text));
  ASSERT_TRUE(decoded.ok()) << decoded.error().message;
  EXPECT_EQ(job_to_json(decoded.value()), job_to_json(job));
  EXPECT_EQ(job_record_text(decoded.value()), new_text);
}

TEST(JobCodecTest, TheRecordTextIsTheTreesDumpForAJobWithEveryFieldSet) {
  auto valid = api::parse_job_spec(api::to_json(full_spec()));
  ASSERT_TRUE(valid.ok()) << valid.error().message;
  expect_same_record(full_job());
}

TEST(JobCodecTest, TheRecordTextIsTheTreesDumpForAJobWithNothingSet) {
  Job job;
  job.id = "job_000000000000";
  job.spec.entrypoint = "true";
  expect_same_record(job);
}

TEST(JobCodecTest, TheRecordTextIsTheTreesDumpForEveryStateAndPendingKind) {
  Job job = full_job();
  for (JobState state :
       {JobState::kPending, JobState::kRunning, JobState::kSucceeded, JobState::kFailed, JobState::kStopped}) {
    job.state = state;
    for (int kind = 0; kind <= static_cast<int>(sched::PendingKind::kPreempting); ++kind) {
      job.pending_kind = static_cast<sched::PendingKind>(kind);
      expect_same_record(job);
    }
  }
  job.pending_kind.reset();
  job.spec.queue.clear();
  job.held_by.clear();
  job.array_id.clear();
  job.attempts.back().failure_tail.reset();
  job.attempts.back().failed_task = -1;
  expect_same_record(job);
}

// Random strings (ASCII, control characters and UTF-8 of every length) in every string
// field of random jobs.
TEST(JobCodecTest, TheRecordTextIsTheTreesDumpForRandomJobs) {
  std::mt19937 random(7);
  // Control characters first: a spec's one-line fields take none.
  constexpr size_t kControlPieces = 5;
  const std::vector<std::string> pieces = {"\x01",
                                           "\x1f",
                                           "\n",
                                           "\t",
                                           "\x7f",
                                           "a",
                                           "Z",
                                           " ",
                                           "\"",
                                           "\\",
                                           "/",
                                           "\xc3\xa9",
                                           "\xe2\x82\xac",
                                           "\xf0\x9f\x9a\x80",
                                           "\xed\x9f\xbf"};
  auto text_of = [&](size_t first_piece) {
    std::string out;
    for (size_t n = random() % 12; n > 0; --n) out += pieces[first_piece + random() % (pieces.size() - first_piece)];
    return out;
  };
  auto text = [&] { return text_of(0); };
  // Labels and queue names are words.
  auto one_line = [&] { return text_of(kControlPieces); };
  auto word = [&] { return std::string(1 + random() % 8, static_cast<char>('a' + random() % 26)); };
  for (int round = 0; round < 200; ++round) {
    Job job = full_job();
    job.id = text();
    job.owner = text();
    job.message = text();
    job.spec.entrypoint = "x" + text();
    job.spec.name = one_line();
    job.spec.labels = {{word(), word()}, {word(), word()}};
    job.spec.num_cpus = static_cast<double>(1 + random() % 100000) / 1000.0;
    job.spec.num_gpus = static_cast<int64_t>(random() % 9);
    job.held_by = text();
    job.spec.queue = word();
    job.array_id = round % 2 ? text() : "";
    job.retry_at_ms = static_cast<int64_t>(random()) - (int64_t{1} << 31);
    for (auto& attempt : job.attempts) {
      attempt.failure_reason = text();
      attempt.master_addr = text();
      for (auto& t : attempt.tasks) {
        t.reason = text();
        t.node_id = text();
        t.gpu_ids.resize(random() % 4, static_cast<int>(random() % 8));
      }
    }
    expect_same_record(job);
  }
}

// What dump() refuses (a string that is not UTF-8) is refused the same way.
TEST(JobCodecTest, AStringThatIsNotUtf8IsRefusedAsTheTreesDumpRefusesIt) {
  for (const std::string bad : {"\xff", "caf\xc3", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\x80"}) {
    Job job = full_job();
    job.attempts.back().tasks.back().reason = "x" + bad + "y";
    try {
      job_to_json(job).dump();
      ADD_FAILURE() << "dump() took it";
    } catch (const json::type_error& e) {
      EXPECT_EQ(e.id, 316);
    }
    EXPECT_THROW(job_record_text(job), json::type_error);
  }
}

TEST(JobCodecTest, TheEventTextIsTheTreesDump) {
  for (const JobEvent& event : {JobEvent{1, tricky("event"), 0, ""}, JobEvent{-2, "", 42, tricky("type")},
                                JobEvent{std::numeric_limits<int64_t>::min(), "placed", 1, "job.placed"}}) {
    const std::string text = event_record_text(event);
    EXPECT_EQ(text, event_to_json(event).dump());
    auto decoded = event_from_json(json::parse(text));
    ASSERT_TRUE(decoded.ok());
    EXPECT_EQ(event_to_json(decoded.value()), event_to_json(event));
  }
  EXPECT_THROW(event_record_text(JobEvent{1, "\xff", 0, ""}), json::type_error);
}

}  // namespace
}  // namespace ag::head
