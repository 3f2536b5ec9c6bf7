#include "api/protocol.h"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

#include "api/json_fields.h"
#include "common/json_text.h"

namespace ag::api {
namespace {

using nlohmann::json;
using wire::Fields;

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

namespace {

// A launch as dump() writes its tree (keys sorted), or "" where a string is not valid
// UTF-8 (dump() then writes U+FFFD for each bad byte). Written straight: the head sends
// one for every task it places.
std::string launch_text(const Launch& m) {
  std::string out;
  out.reserve(512 + m.entrypoint.size());
  JsonText w(out);
  const auto string_map = [&](const char* name, const std::map<std::string, std::string>& map) {
    w.key(name).begin_object();
    for (const auto& [key, value] : map) w.key(key).string(value);
    w.end_object();
  };
  w.begin_object().key("attempt").integer(m.task.attempt);
  if (m.cpu_limit_millis > 0) w.key("cpu_limit_millis").integer(m.cpu_limit_millis);
  w.key("entrypoint").string(m.entrypoint);
  string_map("env", m.env);
  string_map("env_vars", m.env_vars);
  if (m.epoch > 0) w.key("epoch").integer(m.epoch);
  w.key("gpu_ids").begin_array();
  for (int id : m.gpu_ids) w.integer(id);
  w.end_array();
  if (!m.image.empty()) w.key("image").string(m.image);
  w.key("job_id").string(m.task.job_id);
  if (m.memory_limit_bytes > 0) w.key("memory_limit_bytes").integer(m.memory_limit_bytes);
  if (!m.mounts.empty()) {
    w.key("mounts").begin_array();
    for (const auto& mount : m.mounts) {
      w.begin_object().key("read_only").boolean(mount.read_only);
      w.key("source").string(mount.source).key("target").string(mount.target).end_object();
    }
    w.end_array();
  }
  if (!m.owner.empty()) w.key("owner").string(m.owner);
  w.key("python_executable").string(m.python_executable);
  w.key("task_index").integer(m.task.task_index);
  w.key("type").string("launch");
  w.key("working_dir_hash").string(m.working_dir_hash).end_object();
  return w.ok() ? out : std::string();
}

}  // namespace

std::string encode(const Launch& m) {
  if (std::string text = launch_text(m); !text.empty()) return text;
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

}  // namespace ag::api
