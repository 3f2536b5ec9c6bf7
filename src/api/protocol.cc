#include "api/protocol.h"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

namespace ag::api {
namespace {

using nlohmann::json;

// Reads the fields of one JSON object into typed values without exceptions. The
// first problem is kept, named by its path ("launch.env.PATH: expected a string");
// later reads are skipped once there is one.
class Fields {
 public:
  Fields(const json& object, std::string path) : object_(object), path_(std::move(path)) {
    if (!object_.is_object()) fail(path_, "expected an object");
  }

  bool ok() const { return !error_; }
  Error error() const { return invalid_argument(*error_); }

  // A child object's reader (an empty one when absent or wrong; the problem is kept).
  Fields object(const char* name) {
    const json* v = find(name, true);
    static const json kEmpty = json::object();
    Fields child(v && v->is_object() ? *v : kEmpty, path_ + "." + name);
    if (v && !v->is_object()) fail(where(name), "expected an object");
    return child;
  }

  void string(const char* name, std::string* out, bool required = true) {
    const json* v = find(name, required);
    if (!v) return;
    if (!v->is_string()) return fail(where(name), "expected a string");
    *out = v->get_ref<const std::string&>();
  }

  template <typename Int>
  void integer(const char* name, Int* out, int64_t min, int64_t max, bool required = true) {
    const json* v = find(name, required);
    if (!v) return;
    if (auto n = as_integer(*v, where(name), min, max)) *out = static_cast<Int>(*n);
  }

  // An integer, or null / absent for none.
  void optional_integer(const char* name, std::optional<int>* out) {
    const json* v = find(name, false);
    if (!v || v->is_null()) return;
    if (auto n = as_integer(*v, where(name), std::numeric_limits<int>::min(), std::numeric_limits<int>::max())) {
      *out = static_cast<int>(*n);
    }
  }

  void boolean(const char* name, bool* out, bool required = true) {
    const json* v = find(name, required);
    if (!v) return;
    if (!v->is_boolean()) return fail(where(name), "expected true or false");
    *out = v->get<bool>();
  }

  void number(const char* name, double* out, bool required = true) {
    const json* v = find(name, required);
    if (!v) return;
    if (!v->is_number()) return fail(where(name), "expected a number");
    *out = v->get<double>();
  }

  void integers(const char* name, std::vector<int>* out, int64_t min, int64_t max, bool required = true) {
    const json* v = find(name, required);
    if (!v) return;
    if (!v->is_array()) return fail(where(name), "expected an array");
    out->clear();
    for (size_t i = 0; i < v->size() && ok(); ++i) {
      if (auto n = as_integer((*v)[i], where(name) + "[" + std::to_string(i) + "]", min, max)) {
        out->push_back(static_cast<int>(*n));
      }
    }
  }

  // Fails when `values` (read from field `name`) holds a value twice.
  void distinct(const char* name, std::vector<int> values) {
    if (!ok()) return;
    std::sort(values.begin(), values.end());
    auto twice = std::adjacent_find(values.begin(), values.end());
    if (twice != values.end()) fail(where(name), "holds " + std::to_string(*twice) + " twice");
  }

  void strings(const char* name, std::vector<std::string>* out, bool required = true) {
    const json* v = find(name, required);
    if (!v) return;
    if (!v->is_array()) return fail(where(name), "expected an array of strings");
    out->clear();
    for (size_t i = 0; i < v->size(); ++i) {
      if (!(*v)[i].is_string()) return fail(where(name) + "[" + std::to_string(i) + "]", "expected a string");
      out->push_back((*v)[i].get<std::string>());
    }
  }

  void string_map(const char* name, std::map<std::string, std::string>* out, bool required = true) {
    const json* v = find(name, required);
    if (!v) return;
    if (!v->is_object()) return fail(where(name), "expected an object of strings");
    out->clear();
    for (const auto& [key, value] : v->items()) {
      if (!value.is_string()) return fail(where(name) + "." + key, "expected a string");
      (*out)[key] = value.get_ref<const std::string&>();
    }
  }

  // Calls `read(element_reader)` for each object of an array field.
  template <typename Fn>
  void objects(const char* name, Fn read, bool required = true) {
    const json* v = find(name, required);
    if (!v) return;
    if (!v->is_array()) return fail(where(name), "expected an array");
    for (size_t i = 0; i < v->size() && ok(); ++i) {
      Fields element((*v)[i], where(name) + "[" + std::to_string(i) + "]");
      read(element);
      if (!element.ok()) error_ = element.error_;
    }
  }

  void id(const char* name, std::string* out) {
    string(name, out);
    if (ok() && !is_safe_id(*out)) {
      fail(where(name), "expected 1-" + std::to_string(kMaxIdBytes) + " characters of [A-Za-z0-9_-]");
    }
  }

  void task_key(TaskKey* key) {
    id("job_id", &key->job_id);
    integer("attempt", &key->attempt, 0, kMaxAttempt);
    integer("task_index", &key->task_index, 0, kMaxTaskIndex);
  }

  void task_exit(TaskExit* exit) {
    optional_integer("exit_code", &exit->exit_code);
    optional_integer("signal", &exit->signal);
    string("start_error", &exit->start_error, false);
    string("lost", &exit->lost, false);
    boolean("out_of_memory", &exit->out_of_memory, false);
    integer("memory_limit_bytes", &exit->memory_limit_bytes, 0, std::numeric_limits<int64_t>::max(), false);
  }

  // Takes over a child reader's problem.
  // Whether `name` is there and not null.
  bool present(const char* name) const {
    if (!object_.is_object()) return false;
    auto it = object_.find(name);
    return it != object_.end() && !it->is_null();
  }

  void merge(const Fields& child) {
    if (ok() && !child.ok()) error_ = child.error_;
  }

 private:
  std::string where(const char* name) const { return path_ + "." + name; }

  const json* find(const char* name, bool required) {
    if (!ok() || !object_.is_object()) return nullptr;
    auto it = object_.find(name);
    if (it == object_.end()) {
      if (required) fail(where(name), "missing");
      return nullptr;
    }
    return &*it;
  }

  std::optional<int64_t> as_integer(const json& v, const std::string& at, int64_t min, int64_t max) {
    if (!v.is_number_integer()) {
      fail(at, "expected an integer");
      return std::nullopt;
    }
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      fail(at, "out of range");
      return std::nullopt;
    }
    int64_t n = v.get<int64_t>();
    if (n < min || n > max) {
      fail(at, "must be between " + std::to_string(min) + " and " + std::to_string(max) + ", got " +
                   std::to_string(n));
      return std::nullopt;
    }
    return n;
  }

  void fail(const std::string& at, const std::string& what) {
    if (!error_) error_ = at + ": " + what;
  }

  const json& object_;
  std::string path_;
  std::optional<std::string> error_;
};

constexpr int64_t kMaxInt64 = std::numeric_limits<int64_t>::max();
constexpr int kMaxPort = 65535;

json key_json(const char* type, const TaskKey& key) {
  return {{"type", type}, {"job_id", key.job_id}, {"attempt", key.attempt}, {"task_index", key.task_index}};
}

json exit_json(const TaskExited& m) {
  json j = key_json("task_exited", m.task);
  j["exit_code"] = m.exit.exit_code ? json(*m.exit.exit_code) : json(nullptr);
  j["signal"] = m.exit.signal ? json(*m.exit.signal) : json(nullptr);
  if (!m.exit.start_error.empty()) j["start_error"] = m.exit.start_error;
  if (!m.exit.lost.empty()) j["lost"] = m.exit.lost;
  if (m.exit.out_of_memory) j["out_of_memory"] = true;
  if (m.exit.memory_limit_bytes > 0) j["memory_limit_bytes"] = m.exit.memory_limit_bytes;
  if (m.log_bytes >= 0) j["log_bytes"] = m.log_bytes;
  return j;
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void read_exited(Fields& f, TaskExited* m) {
  f.task_key(&m->task);
  f.task_exit(&m->exit);
  f.integer("log_bytes", &m->log_bytes, 0, kMaxInt64, false);
}

// Parses the frame's JSON object and its "type".
Result<std::pair<json, std::string>> parse_typed(std::string_view text) {
  if (text.size() > kMaxControlMessageBytes) {
    return invalid_argument("message of " + std::to_string(text.size()) + " bytes is over the " +
                            std::to_string(kMaxControlMessageBytes) + "-byte limit");
  }
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return invalid_argument("message is not valid JSON");
  if (!doc.is_object()) return invalid_argument("message is not a JSON object");
  auto type = doc.find("type");
  if (type == doc.end() || !type->is_string()) return invalid_argument("message has no string \"type\"");
  std::string name = type->get<std::string>();
  return std::pair<json, std::string>{std::move(doc), std::move(name)};
}

template <typename Message, typename Fn>
Result<Message> read_as(const json& doc, const std::string& type, Fn read) {
  Fields f(doc, type);
  auto m = read(f);
  if (!f.ok()) return f.error();
  return Message{std::move(m)};
}

std::string protocol_versions_spoken() {
  if (kOldestWorkerProtocol == kWorkerProtocol) return "version " + std::to_string(kWorkerProtocol);
  return "versions " + std::to_string(kOldestWorkerProtocol) + " to " + std::to_string(kWorkerProtocol);
}

}  // namespace

bool is_safe_id(std::string_view id) {
  if (id.empty() || id.size() > kMaxIdBytes) return false;
  for (char c : id) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::string TaskKey::to_string() const {
  return job_id + "/" + std::to_string(attempt) + "/" + std::to_string(task_index);
}

namespace {

json health_json(const HealthReport& m) {
  json j = {{"healthy", m.healthy}, {"reason", m.reason}, {"sticky", m.sticky}};
  if (!m.gpu_kind.empty()) {
    j["gpu_kind"] = m.gpu_kind;
    j["gpu_index"] = m.gpu_index;
  }
  return j;
}

void read_health(Fields& f, HealthReport* m) {
  f.boolean("healthy", &m->healthy);
  f.string("reason", &m->reason, false);
  f.boolean("sticky", &m->sticky, false);
  f.string("gpu_kind", &m->gpu_kind, false);
  int64_t index = -1;
  f.integer("gpu_index", &index, -1, kMaxNodeGpus, false);
  m->gpu_index = static_cast<int>(index);
}

}  // namespace

std::string encode(const HealthReport& m) {
  json j = health_json(m);
  j["type"] = "health_report";
  return dump(j);
}

std::string encode(const Register& m) {
  json running = json::array();
  for (const auto& r : m.running) {
    running.push_back({{"job_id", r.task.job_id}, {"attempt", r.task.attempt},
                       {"task_index", r.task.task_index}, {"pid", r.pid}});
  }
  json exited = json::array();
  for (const auto& e : m.exited) exited.push_back(exit_json(e));
  return dump({{"type", "register"},
               {"protocol_version", m.protocol_version},
               {"node_id", m.node_id},
               {"address", m.address},
               {"hostname", m.hostname},
               {"network_interface", m.network_interface},
               {"resources", {{"cpu_millis", m.cpu_millis}, {"memory_bytes", m.memory_bytes}, {"gpu_ids", m.gpu_ids}}},
               {"running", running},
               {"exited", exited},
               {"busy_ports", m.busy_ports},
               {"labels", m.labels},
               {"limits", m.limits},
               {"container_engine", m.container_engine},
               {"allowed_mounts", m.allowed_mounts},
               {"unhealthy", m.unhealthy ? health_json(*m.unhealthy) : json(nullptr)}});
}

std::string encode(const Heartbeat& m) {
  json gpus = json::array();
  for (const auto& g : m.usage.gpus) {
    gpus.push_back({{"index", g.index}, {"utilization_percent", g.utilization_percent},
                    {"memory_used_bytes", g.memory_used_bytes}, {"memory_total_bytes", g.memory_total_bytes}});
  }
  json tasks = json::array();
  for (const auto& t : m.usage.tasks) {
    json one = key_json("task_usage", t.task);
    one.erase("type");
    one["cpu_percent"] = t.cpu_percent;
    one["memory_bytes"] = t.memory_bytes;
    tasks.push_back(std::move(one));
  }
  return dump({{"type", "heartbeat"},
               {"usage", {{"cpu_percent", m.usage.cpu_percent},
                          {"memory_used_bytes", m.usage.memory_used_bytes},
                          {"gpus", gpus},
                          {"tasks", tasks}}},
               {"busy_ports", m.busy_ports}});
}

std::string encode(const TaskStarted& m) {
  json j = key_json("task_started", m.task);
  j["pid"] = m.pid;
  return dump(j);
}

std::string encode(const TaskExited& m) { return dump(exit_json(m)); }

std::string encode(const PullUpdate& m) {
  json j{{"type", "pull_update"}, {"pull_id", m.pull_id}, {"text", m.text}, {"done", m.done}};
  if (!m.error.empty()) j["error"] = m.error;
  return dump(j);
}

std::string encode(const Pull& m) { return dump({{"type", "pull"}, {"pull_id", m.pull_id}, {"image", m.image}}); }

std::string encode(const TaskNote& m) {
  json j = key_json("task_note", m.task);
  j["text"] = m.text;
  return dump(j);
}

std::string encode(const Registered& m) {
  json j{{"type", "registered"}, {"node_id", m.node_id}, {"node_timeout_ms", m.node_timeout_ms}};
  if (!m.node_credential.empty()) j["node_credential"] = m.node_credential;
  if (m.epoch > 0) j["epoch"] = m.epoch;
  return dump(j);
}

std::string encode(const Launch& m) {
  json j = key_json("launch", m.task);
  j["entrypoint"] = m.entrypoint;
  j["env"] = m.env;
  j["env_vars"] = m.env_vars;
  j["gpu_ids"] = m.gpu_ids;
  j["working_dir_hash"] = m.working_dir_hash;
  j["python_executable"] = m.python_executable;
  if (m.memory_limit_bytes > 0) j["memory_limit_bytes"] = m.memory_limit_bytes;
  if (m.cpu_limit_millis > 0) j["cpu_limit_millis"] = m.cpu_limit_millis;
  if (!m.image.empty()) j["image"] = m.image;
  if (!m.owner.empty()) j["owner"] = m.owner;
  if (m.epoch > 0) j["epoch"] = m.epoch;
  if (!m.mounts.empty()) {
    json mounts = json::array();
    for (const auto& mount : m.mounts) {
      mounts.push_back({{"source", mount.source}, {"target", mount.target}, {"read_only", mount.read_only}});
    }
    j["mounts"] = std::move(mounts);
  }
  return dump(j);
}

std::string encode(const Kill& m) {
  json j = key_json("kill", m.task);
  j["grace_ms"] = m.grace_ms;
  if (m.epoch > 0) j["epoch"] = m.epoch;
  return dump(j);
}

std::string encode(const ExitAck& m) { return dump(key_json("exit_ack", m.task)); }

std::string encode(const LogResume& m) {
  json j = key_json("log_resume", m.task);
  j["offset"] = m.offset;
  return dump(j);
}

std::string encode(const ErrorMessage& m) {
  json j{{"type", "error"}, {"message", m.message}};
  if (m.final) j["final"] = true;
  return dump(j);
}

std::string encode(const HeartbeatAck&) { return R"({"type":"heartbeat_ack"})"; }

std::string encode(const ExecOpen& m) {
  json j = key_json("exec_open", m.task);
  j["session"] = m.session;
  j["command"] = m.command;
  if (m.with_stdin) j["stdin"] = true;
  if (m.tty) {
    j["tty"] = true;
    j["rows"] = m.rows;
    j["cols"] = m.cols;
    j["term"] = m.term;
  }
  if (m.port > 0) j["port"] = m.port;
  return dump(j);
}

std::string encode(const HealthCleared&) { return dump({{"type", "health_cleared"}}); }

std::string encode(const StackRequest& m) {
  json j = key_json("stack_request", m.task);
  j["request"] = m.request;
  return dump(j);
}

std::string encode(const StackReport& m) {
  json j = key_json("stack_report", m.task);
  j["request"] = m.request;
  j["python"] = m.python;
  j["text"] = m.text;
  if (!m.error.empty()) j["error"] = m.error;
  return dump(j);
}

std::string encode(const WorkerMessage& m) {
  return std::visit([](const auto& message) { return encode(message); }, m);
}

std::string encode(const HeadMessage& m) {
  return std::visit([](const auto& message) { return encode(message); }, m);
}

Result<WorkerMessage> decode_worker_message(std::string_view text) {
  auto parsed = parse_typed(text);
  if (!parsed.ok()) return parsed.error();
  const auto& [doc, type] = parsed.value();
  if (type == "register") {
    // The version first: a register of another version may not read as this one.
    int64_t version = 1;
    if (auto it = doc.find("protocol_version"); it != doc.end()) {
      if (!it->is_number_integer()) return invalid_argument("register.protocol_version: expected an integer");
      const bool huge = it->is_number_unsigned() && it->get<uint64_t>() > uint64_t{kMaxInt64};
      version = huge ? kMaxInt64 : it->get<int64_t>();
    }
    if (version < kOldestWorkerProtocol || version > kWorkerProtocol) {
      return Error{ErrorCode::kConflict,
                   "this worker speaks worker protocol version " + std::to_string(version) + ", but the head (" +
                       version_line() + ") speaks " + protocol_versions_spoken() +
                       "; run the same AetherGrid release on the head and the workers (upgrade the head first)"};
    }
    return read_as<WorkerMessage>(doc, type, [version](Fields& f) {
      Register m;
      m.protocol_version = static_cast<int>(version);  // within the range just checked
      f.id("node_id", &m.node_id);
      f.string_map("labels", &m.labels, false);
      f.string("limits", &m.limits, false);
      f.string("container_engine", &m.container_engine, false);
      f.strings("allowed_mounts", &m.allowed_mounts, false);
      f.string("address", &m.address);
      f.string("hostname", &m.hostname, false);
      f.string("network_interface", &m.network_interface, false);
      Fields res = f.object("resources");
      res.integer("cpu_millis", &m.cpu_millis, 0, kMaxNodeCpuMillis);
      res.integer("memory_bytes", &m.memory_bytes, 0, kMaxNodeMemoryBytes);
      res.integers("gpu_ids", &m.gpu_ids, 0, kMaxNodeGpus - 1);
      res.distinct("gpu_ids", m.gpu_ids);
      f.merge(res);
      f.objects("running", [&](Fields& r) {
        RunningTask task;
        r.task_key(&task.task);
        r.integer("pid", &task.pid, 0, kMaxInt64);
        m.running.push_back(std::move(task));
      }, false);
      f.objects("exited", [&](Fields& e) {
        TaskExited exited;
        read_exited(e, &exited);
        m.exited.push_back(std::move(exited));
      }, false);
      f.integers("busy_ports", &m.busy_ports, 0, kMaxPort, false);
      if (f.present("unhealthy")) {
        Fields health = f.object("unhealthy");
        HealthReport report;
        read_health(health, &report);
        f.merge(health);
        m.unhealthy = report;
      }
      return m;
    });
  }
  if (type == "health_report") {
    return read_as<WorkerMessage>(doc, type, [](Fields& f) {
      HealthReport m;
      read_health(f, &m);
      return m;
    });
  }
  if (type == "heartbeat") {
    return read_as<WorkerMessage>(doc, type, [](Fields& f) {
      Heartbeat m;
      Fields usage = f.object("usage");
      usage.number("cpu_percent", &m.usage.cpu_percent);
      usage.integer("memory_used_bytes", &m.usage.memory_used_bytes, 0, kMaxInt64);
      usage.objects("gpus", [&](Fields& g) {
        GpuUsage gpu;
        g.integer("index", &gpu.index, 0, 1 << 20);
        g.integer("utilization_percent", &gpu.utilization_percent, 0, 100);
        g.integer("memory_used_bytes", &gpu.memory_used_bytes, 0, kMaxInt64);
        g.integer("memory_total_bytes", &gpu.memory_total_bytes, 0, kMaxInt64);
        m.usage.gpus.push_back(gpu);
      });
      usage.objects("tasks", [&](Fields& t) {
        TaskUsage task;
        t.task_key(&task.task);
        t.number("cpu_percent", &task.cpu_percent);
        t.integer("memory_bytes", &task.memory_bytes, 0, kMaxInt64);
        m.usage.tasks.push_back(std::move(task));
      }, false);
      f.merge(usage);
      f.integers("busy_ports", &m.busy_ports, 0, kMaxPort, false);
      return m;
    });
  }
  if (type == "task_started") {
    return read_as<WorkerMessage>(doc, type, [](Fields& f) {
      TaskStarted m;
      f.task_key(&m.task);
      f.integer("pid", &m.pid, 0, kMaxInt64);
      return m;
    });
  }
  if (type == "pull_update") {
    return read_as<WorkerMessage>(doc, type, [](Fields& f) {
      PullUpdate m;
      f.id("pull_id", &m.pull_id);
      f.string("text", &m.text, false);
      f.boolean("done", &m.done);
      f.string("error", &m.error, false);
      return m;
    });
  }
  if (type == "stack_report") {
    return read_as<WorkerMessage>(doc, type, [](Fields& f) {
      StackReport m;
      f.task_key(&m.task);
      f.id("request", &m.request);
      f.boolean("python", &m.python);
      f.string("text", &m.text);
      f.string("error", &m.error, false);
      return m;
    });
  }
  if (type == "task_note") {
    return read_as<WorkerMessage>(doc, type, [](Fields& f) {
      TaskNote m;
      f.task_key(&m.task);
      f.string("text", &m.text);
      return m;
    });
  }
  if (type == "task_exited") {
    return read_as<WorkerMessage>(doc, type, [](Fields& f) {
      TaskExited m;
      read_exited(f, &m);
      return m;
    });
  }
  if (type == "error") {
    return read_as<WorkerMessage>(doc, type, [](Fields& f) {
      ErrorMessage m;
      f.string("message", &m.message);
      f.boolean("final", &m.final, false);
      return m;
    });
  }
  return invalid_argument("unknown message type '" + type + "' from a worker");
}

Result<HeadMessage> decode_head_message(std::string_view text) {
  auto parsed = parse_typed(text);
  if (!parsed.ok()) return parsed.error();
  const auto& [doc, type] = parsed.value();
  if (type == "registered") {
    return read_as<HeadMessage>(doc, type, [](Fields& f) {
      Registered m;
      f.id("node_id", &m.node_id);
      f.integer("node_timeout_ms", &m.node_timeout_ms, 1, kMaxInt64);
      f.string("node_credential", &m.node_credential, false);
      f.integer("epoch", &m.epoch, 0, kMaxInt64, false);
      return m;
    });
  }
  if (type == "launch") {
    return read_as<HeadMessage>(doc, type, [](Fields& f) {
      Launch m;
      f.task_key(&m.task);
      f.string("entrypoint", &m.entrypoint);
      f.string_map("env", &m.env);
      f.string_map("env_vars", &m.env_vars, false);
      f.integers("gpu_ids", &m.gpu_ids, 0, 1 << 20, false);
      f.string("working_dir_hash", &m.working_dir_hash, false);
      f.string("python_executable", &m.python_executable, false);
      f.integer("memory_limit_bytes", &m.memory_limit_bytes, 0, kMaxInt64, false);
      f.integer("cpu_limit_millis", &m.cpu_limit_millis, 0, kMaxInt64, false);
      f.string("image", &m.image, false);
      f.string("owner", &m.owner, false);
      f.integer("epoch", &m.epoch, 0, kMaxInt64, false);
      f.objects(
          "mounts",
          [&m](Fields& e) {
            Mount mount;
            e.string("source", &mount.source);
            e.string("target", &mount.target);
            e.boolean("read_only", &mount.read_only, false);
            m.mounts.push_back(std::move(mount));
          },
          false);
      return m;
    });
  }
  if (type == "pull") {
    return read_as<HeadMessage>(doc, type, [](Fields& f) {
      Pull m;
      f.id("pull_id", &m.pull_id);
      f.string("image", &m.image);
      return m;
    });
  }
  if (type == "health_cleared") return HeadMessage{HealthCleared{}};
  if (type == "stack_request") {
    return read_as<HeadMessage>(doc, type, [](Fields& f) {
      StackRequest m;
      f.task_key(&m.task);
      f.id("request", &m.request);
      return m;
    });
  }
  if (type == "exec_open") {
    return read_as<HeadMessage>(doc, type, [](Fields& f) {
      ExecOpen m;
      f.task_key(&m.task);
      f.id("session", &m.session);
      f.strings("command", &m.command);
      f.boolean("stdin", &m.with_stdin, false);
      f.boolean("tty", &m.tty, false);
      f.integer("rows", &m.rows, 0, 65535, false);
      f.integer("cols", &m.cols, 0, 65535, false);
      f.string("term", &m.term, false);
      f.integer("port", &m.port, 0, 65535, false);
      return m;
    });
  }
  if (type == "kill") {
    return read_as<HeadMessage>(doc, type, [](Fields& f) {
      Kill m;
      f.task_key(&m.task);
      f.integer("grace_ms", &m.grace_ms, 0, kMaxInt64);
      f.integer("epoch", &m.epoch, 0, kMaxInt64, false);
      return m;
    });
  }
  if (type == "heartbeat_ack") return HeadMessage{HeartbeatAck{}};
  if (type == "exit_ack") {
    return read_as<HeadMessage>(doc, type, [](Fields& f) {
      ExitAck m;
      f.task_key(&m.task);
      return m;
    });
  }
  if (type == "log_resume") {
    return read_as<HeadMessage>(doc, type, [](Fields& f) {
      LogResume m;
      f.task_key(&m.task);
      f.integer("offset", &m.offset, 0, kMaxInt64);
      return m;
    });
  }
  if (type == "error") {
    return read_as<HeadMessage>(doc, type, [](Fields& f) {
      ErrorMessage m;
      f.string("message", &m.message);
      f.boolean("final", &m.final, false);
      return m;
    });
  }
  return invalid_argument("unknown message type '" + type + "' from the head");
}

std::optional<TaskKey> task_key_of(std::string_view text, std::string_view type) {
  auto parsed = parse_typed(text);
  if (!parsed.ok() || parsed->second != type) return std::nullopt;
  const json& doc = parsed->first;
  Fields f(doc, "message");
  TaskKey key;
  f.task_key(&key);
  if (!f.ok()) return std::nullopt;
  return key;
}

std::string log_frame_prefix(const LogFrameHeader& header, size_t payload_capacity) {
  json h = {{"job_id", header.task.job_id}, {"attempt", header.task.attempt},
            {"task_index", header.task.task_index}, {"offset", header.offset}};
  std::string head = h.dump();
  std::string out;
  out.reserve(4 + head.size() + payload_capacity);
  auto n = static_cast<uint32_t>(head.size());
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((n >> shift) & 0xff));
  out += head;
  return out;
}

std::string encode_log_frame(const LogFrameHeader& header, std::string_view payload) {
  std::string out = log_frame_prefix(header, payload.size());
  out.append(payload.data(), payload.size());
  return out;
}

Result<LogFrameHeader> decode_log_frame(std::string_view frame, std::string_view* payload) {
  if (frame.size() < 4) return invalid_argument("log frame of " + std::to_string(frame.size()) + " bytes has no header");
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n = (n << 8) | static_cast<unsigned char>(frame[i]);
  if (n > frame.size() - 4) {
    return invalid_argument("log frame header of " + std::to_string(n) + " bytes runs past the frame's end");
  }
  json h = json::parse(frame.substr(4, n), nullptr, /*allow_exceptions=*/false);
  Fields f(h, "log_frame");
  LogFrameHeader header;
  f.task_key(&header.task);
  f.integer("offset", &header.offset, 0, kMaxInt64);
  if (!f.ok()) return f.error();
  *payload = frame.substr(4 + n);
  return header;
}

}  // namespace ag::api
