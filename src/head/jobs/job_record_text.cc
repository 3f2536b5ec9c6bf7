// The stored form of jobs and events written straight to text (job_codec.h): the same
// bytes as job_to_json(job).dump(), whose tree costs most of what writing a job ahead
// costs. Keys go in the order dump() writes them (sorted); job_codec_test compares the
// two byte for byte.
#include <nlohmann/json.hpp>

#include "common/json_text.h"
#include "head/jobs/job_codec.h"

namespace ag::head {
namespace {

void optional_int(JsonText& out, const std::optional<int>& value) {
  if (value) {
    out.integer(*value);
  } else {
    out.null();
  }
}

void string_or_null(JsonText& out, std::string_view value, bool present) {
  if (present) {
    out.string(value);
  } else {
    out.null();
  }
}

void write_task(JsonText& out, const TaskRecord& t) {
  out.begin_object();
  out.key("exit_code");
  optional_int(out, t.exit_code);
  out.key("finished_ms").integer(t.finished_ms);
  out.key("gpu_ids").begin_array();
  for (int gpu : t.gpu_ids) out.integer(gpu);
  out.end_array();
  out.key("node_address").string(t.node_address);
  out.key("node_id").string(t.node_id);
  out.key("pid").integer(t.pid);
  out.key("reason").string(t.reason);
  out.key("signal");
  optional_int(out, t.signal);
  out.key("started_ms").integer(t.started_ms);
  out.key("state").string(to_string(t.state));
  out.key("task_index").integer(t.index);
  out.end_object();
}

void write_attempt(JsonText& out, const AttemptRecord& a) {
  out.begin_object();
  out.key("attempt").integer(a.number);
  out.key("ending").boolean(a.ending);
  out.key("failed_task_index");
  optional_int(out, a.failed_task >= 0 ? std::optional<int>(a.failed_task) : std::nullopt);
  out.key("failure_exit_code");
  optional_int(out, a.failure_exit_code);
  out.key("failure_node_lost").boolean(a.failure_node_lost);
  out.key("failure_reason").string(a.failure_reason);
  out.key("finished_ms").integer(a.finished_ms);
  out.key("held_until_ms").integer(a.held_until_ms);
  out.key("last_lines");
  string_or_null(out, a.failure_tail ? std::string_view(*a.failure_tail) : "", a.failure_tail.has_value());
  out.key("master_addr").string(a.master_addr);
  out.key("master_port").integer(a.master_port);
  out.key("preempted").boolean(a.preempted);
  out.key("started_ms").integer(a.started_ms);
  out.key("tasks").begin_array();
  for (const auto& t : a.tasks) write_task(out, t);
  out.end_array();
  out.end_object();
}

void write_job(JsonText& out, const Job& job, const JobSpecText& spec_text) {
  const api::JobSpec& spec = job.spec;
  out.begin_object();
  if (!job.array_id.empty()) {
    out.key("array_id").string(job.array_id);
    out.key("array_index").integer(job.array_index);
  }
  out.key("attempts").begin_array();
  for (const auto& a : job.attempts) write_attempt(out, a);
  out.end_array();
  out.key("entrypoint").string(spec.entrypoint);
  out.key("finished_ms").integer(job.finished_ms);
  out.key("held_by");
  string_or_null(out, job.held_by, !job.held_by.empty());
  out.key("job_id").string(job.id);
  out.key("labels").begin_object();
  for (const auto& [name, value] : spec.labels) out.key(name).string(value);
  out.end_object();
  out.key("message").string(job.message);
  out.key("name").string(spec.name);
  out.key("num_attempts").unsigned_integer(job.attempts.size());
  out.key("num_cpus").raw(spec_text.num_cpus);
  out.key("num_gpus").integer(spec.num_gpus);
  out.key("num_workers").integer(spec.num_workers);
  out.key("owner").string(job.owner);
  out.key("pending_kind");
  string_or_null(out, job.pending_kind ? sched::to_string(*job.pending_kind) : "", job.pending_kind.has_value());
  out.key("priority").integer(spec.priority);
  out.key("queue");
  string_or_null(out, spec.queue, !spec.queue.empty());
  out.key("queue_seq").unsigned_integer(job.queue_seq);
  out.key("retry_at_ms").integer(job.retry_at_ms);
  out.key("spec").raw(spec_text.spec);
  out.key("started_ms").integer(job.started_ms);
  out.key("state").string(to_string(job.state));
  out.key("stop_requested").boolean(job.stop_requested);
  out.key("submitted_from").string(job.submitted_from);
  out.key("submitted_ms").integer(job.submitted_ms);
  out.key("timed_out").boolean(job.timed_out);
  out.end_object();
}

}  // namespace

std::shared_ptr<const JobSpecText> make_spec_text(const api::JobSpec& spec) {
  return std::make_shared<const JobSpecText>(
      JobSpecText{api::to_json(spec).dump(), nlohmann::json(spec.num_cpus).dump()});
}

std::string job_record_text(const Job& job) {
  std::shared_ptr<const JobSpecText> made;
  const JobSpecText* spec_text = job.spec_text.get();
  if (!spec_text) {
    made = make_spec_text(job.spec);
    spec_text = made.get();
  }
  // Room for the whole record at once (growing it copies it, and keeps twice its size
  // where the store holds it): the keys and numbers, and the strings of any length.
  size_t room = 512 + spec_text->spec.size() + job.spec.entrypoint.size() + job.message.size() + job.spec.name.size() +
                job.owner.size() + job.submitted_from.size();
  for (const auto& a : job.attempts) {
    room += 384 + a.failure_reason.size() + (a.failure_tail ? a.failure_tail->size() + a.failure_tail->size() / 8 : 0);
    for (const auto& t : a.tasks) room += 256 + t.reason.size();
  }
  std::string text;
  text.reserve(room);
  JsonText out(text);
  write_job(out, job, *spec_text);
  // A string that is not UTF-8: the tree's dump() refuses it, saying where.
  if (!out.ok()) return job_to_json(job).dump();
  return text;
}

std::string event_record_text(const JobEvent& event) {
  std::string text;
  text.reserve(80 + event.message.size() + event.type.size());
  JsonText out(text);
  out.begin_object();
  out.key("message").string(event.message);
  // Events stored before the cluster's event stream existed have no place in it.
  if (event.seq > 0) out.key("seq").integer(event.seq);
  out.key("time_ms").integer(event.time_ms);
  if (event.seq > 0) out.key("type").string(event.type);
  out.end_object();
  if (!out.ok()) return event_to_json(event).dump();
  return text;
}

}  // namespace ag::head
