#include "head/jobs/job_codec.h"

#include <cstdio>
#include <utility>

#include <nlohmann/json.hpp>

#include "common/ids.h"

namespace ag::head {
namespace {
using nlohmann::json;

json optional_int(const std::optional<int>& v) { return v ? json(*v) : json(nullptr); }

json task_to_json(const TaskRecord& t) {
  return {{"task_index", t.index},     {"node_id", t.node_id},
          {"node_address", t.node_address}, {"gpu_ids", t.gpu_ids},
          {"state", to_string(t.state)}, {"pid", t.pid},
          {"exit_code", optional_int(t.exit_code)}, {"signal", optional_int(t.signal)},
          {"reason", t.reason},       {"started_ms", t.started_ms},
          {"finished_ms", t.finished_ms}};
}

TaskRecord task_from_json(const json& j) {
  TaskRecord t;
  t.index = j.at("task_index").get<int>();
  t.node_id = j.at("node_id").get<std::string>();
  t.node_address = j.at("node_address").get<std::string>();
  t.gpu_ids = j.at("gpu_ids").get<std::vector<int>>();
  t.state = parse_task_state(j.at("state").get<std::string>()).value_or(TaskState::kFailed);
  t.pid = j.at("pid").get<int64_t>();
  if (!j.at("exit_code").is_null()) t.exit_code = j.at("exit_code").get<int>();
  if (!j.at("signal").is_null()) t.signal = j.at("signal").get<int>();
  t.reason = j.at("reason").get<std::string>();
  t.started_ms = j.at("started_ms").get<int64_t>();
  t.finished_ms = j.at("finished_ms").get<int64_t>();
  return t;
}

json attempt_to_json(const AttemptRecord& a) {
  json tasks = json::array();
  for (const auto& t : a.tasks) tasks.push_back(task_to_json(t));
  return {{"attempt", a.number},         {"master_addr", a.master_addr},
          {"master_port", a.master_port}, {"started_ms", a.started_ms},
          {"finished_ms", a.finished_ms}, {"ending", a.ending},
          {"failure_reason", a.failure_reason},
          {"failed_task_index", a.failed_task >= 0 ? json(a.failed_task) : json(nullptr)},
          {"last_lines", a.failure_tail ? json(*a.failure_tail) : json(nullptr)},
          {"failure_exit_code", optional_int(a.failure_exit_code)}, {"failure_node_lost", a.failure_node_lost},
          {"preempted", a.preempted}, {"held_until_ms", a.held_until_ms}, {"tasks", std::move(tasks)}};
}

AttemptRecord attempt_from_json(const json& j) {
  AttemptRecord a;
  a.number = j.at("attempt").get<int>();
  a.master_addr = j.at("master_addr").get<std::string>();
  a.master_port = j.at("master_port").get<int>();
  a.started_ms = j.at("started_ms").get<int64_t>();
  a.finished_ms = j.at("finished_ms").get<int64_t>();
  a.ending = j.at("ending").get<bool>();
  a.failure_reason = j.at("failure_reason").get<std::string>();
  // Records from before these fields have neither.
  if (j.contains("failed_task_index") && j["failed_task_index"].is_number_integer()) {
    a.failed_task = j["failed_task_index"].get<int>();
  }
  if (j.contains("last_lines") && j["last_lines"].is_string()) a.failure_tail = j["last_lines"].get<std::string>();
  if (j.contains("failure_exit_code") && j["failure_exit_code"].is_number_integer()) {
    a.failure_exit_code = j["failure_exit_code"].get<int>();
  }
  a.failure_node_lost = j.value("failure_node_lost", false);
  a.preempted = j.value("preempted", false);
  a.held_until_ms = j.value("held_until_ms", int64_t{0});
  for (const auto& t : j.at("tasks")) a.tasks.push_back(task_from_json(t));
  return a;
}

}  // namespace

std::string event_key(const std::string& job_id, size_t seq) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "/%08zu", seq);
  return job_id + buf;
}

json job_summary_json(const Job& job) {
  json j;
  j["job_id"] = job.id;
  j["name"] = job.spec.name;
  j["owner"] = job.owner;
  j["state"] = to_string(job.state);
  j["message"] = job.message;
  // What a PENDING job waits for, as a word a script can compare (message says it in full).
  j["pending_kind"] = job.pending_kind ? json(sched::to_string(*job.pending_kind)) : json(nullptr);
  j["entrypoint"] = job.spec.entrypoint;
  j["labels"] = job.spec.labels;
  j["num_workers"] = job.spec.num_workers;
  j["num_gpus"] = job.spec.num_gpus;
  j["num_cpus"] = job.spec.num_cpus;
  j["priority"] = job.spec.priority;
  j["queue"] = job.spec.queue.empty() ? json(nullptr) : json(job.spec.queue);
  j["held_by"] = job.held_by.empty() ? json(nullptr) : json(job.held_by);
  if (!job.array_id.empty()) {
    j["array_id"] = job.array_id;
    j["array_index"] = job.array_index;
  }
  j["attempts"] = job.attempts.size();
  j["submitted_ms"] = job.submitted_ms;
  j["started_ms"] = job.started_ms;
  j["finished_ms"] = job.finished_ms;
  return j;
}

json failure_json(const Job& job) {
  // The task that failed first in the last attempt, not those stopped because of it.
  const AttemptRecord* last = job.current_attempt();
  if (!last || job.state != JobState::kFailed || last->failed_task < 0 ||
      last->failed_task >= static_cast<int>(last->tasks.size())) {
    return nullptr;
  }
  const TaskRecord& task = last->tasks[static_cast<size_t>(last->failed_task)];
  return {{"attempt", last->number}, {"task_index", task.index}, {"node_id", task.node_id},
          {"node_address", task.node_address}, {"reason", task.reason},
          {"last_lines", last->failure_tail.value_or("")}};
}

json job_to_json(const Job& job) {
  json j = job_summary_json(job);
  j["spec"] = api::to_json(job.spec);
  j["stop_requested"] = job.stop_requested;
  j["timed_out"] = job.timed_out;
  j["queue_seq"] = job.queue_seq;
  j["retry_at_ms"] = job.retry_at_ms;
  j["submitted_from"] = job.submitted_from;
  json attempts = json::array();
  for (const auto& a : job.attempts) attempts.push_back(attempt_to_json(a));
  j["attempts"] = std::move(attempts);
  j["num_attempts"] = job.attempts.size();
  return j;
}

Result<Job> job_from_json(const json& j) {
  try {
    Job job;
    job.id = j.at("job_id").get<std::string>();
    auto spec = api::parse_job_spec(j.at("spec"));
    if (!spec.ok()) return internal_error("stored job " + job.id + " has a bad spec: " + spec.error().message);
    job.spec = std::move(spec.value());
    job.state = parse_job_state(j.at("state").get<std::string>()).value_or(JobState::kFailed);
    job.message = j.at("message").get<std::string>();
    if (auto kind = j.find("pending_kind"); kind != j.end() && kind->is_string()) {
      job.pending_kind = sched::parse_pending_kind(kind->get<std::string>());
    }
    job.submitted_ms = j.at("submitted_ms").get<int64_t>();
    job.started_ms = j.at("started_ms").get<int64_t>();
    job.finished_ms = j.at("finished_ms").get<int64_t>();
    job.stop_requested = j.at("stop_requested").get<bool>();
    job.timed_out = j.at("timed_out").get<bool>();
    job.queue_seq = j.at("queue_seq").get<uint64_t>();
    job.retry_at_ms = j.value("retry_at_ms", int64_t{0});
    job.owner = j.value("owner", "");
    job.submitted_from = j.value("submitted_from", "");
    if (auto held = j.find("held_by"); held != j.end() && held->is_string()) job.held_by = held->get<std::string>();
    if (auto array = j.find("array_id"); array != j.end() && array->is_string()) {
      job.array_id = array->get<std::string>();
      job.array_index = j.value("array_index", -1);
    }
    for (const auto& a : j.at("attempts")) job.attempts.push_back(attempt_from_json(a));
    return job;
  } catch (const json::exception& e) {
    return internal_error(std::string("stored job record is malformed: ") + e.what());
  }
}

std::optional<Job> salvage_job(const json& doc, const std::string& why, int64_t now_ms) {
  if (!doc.is_object() || !doc.contains("job_id") || !doc["job_id"].is_string()) return std::nullopt;
  Job job;
  job.id = doc["job_id"].get<std::string>();
  if (!looks_like_job_id(job.id)) return std::nullopt;
  auto text = [](const char* key, const json& from) -> std::string {
    return from.is_object() && from.contains(key) && from[key].is_string() ? from[key].get<std::string>() : "";
  };
  auto number = [&doc](const char* key) -> int64_t {
    return doc.contains(key) && doc[key].is_number_integer() ? doc[key].get<int64_t>() : 0;
  };
  const json spec = doc.contains("spec") ? doc["spec"] : json::object();
  job.spec.entrypoint = text("entrypoint", spec);
  if (job.spec.entrypoint.empty()) job.spec.entrypoint = "(could not be read)";
  job.spec.name = text("job_name", spec);
  job.owner = text("owner", doc);
  job.submitted_from = text("submitted_from", doc);
  job.submitted_ms = number("submitted_ms");
  job.started_ms = number("started_ms");
  job.queue_seq = doc.contains("queue_seq") && doc["queue_seq"].is_number_unsigned() ? doc["queue_seq"].get<uint64_t>() : 0;
  job.state = JobState::kFailed;
  job.finished_ms = now_ms;
  job.message = "this head could not load the job as stored (" + why + "); it was marked FAILED at restart";
  return job;
}

json event_to_json(const JobEvent& event) {
  json j = {{"time_ms", event.time_ms}, {"message", event.message}};
  // Events stored before the cluster's event stream existed have no place in it.
  if (event.seq > 0) {
    j["seq"] = event.seq;
    j["type"] = event.type;
  }
  return j;
}

Result<JobEvent> event_from_json(const json& j) {
  try {
    return JobEvent{j.at("time_ms").get<int64_t>(), j.at("message").get<std::string>(), j.value("seq", int64_t{0}),
                    j.value("type", std::string())};
  } catch (const json::exception& e) {
    return internal_error(std::string("stored event is malformed: ") + e.what());
  }
}

}  // namespace ag::head
