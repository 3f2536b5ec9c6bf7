#include "api/job_spec.h"

#include "common/ids.h"
#include "common/sha256.h"

#include <algorithm>
#include <charconv>
#include <cctype>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

namespace ag::api {
namespace {

using nlohmann::json;

const char* type_name(const json& v) { return v.type_name(); }

Error field_error(const std::string& field, const std::string& what) {
  return invalid_argument("field '" + field + "': " + what);
}

std::optional<Error> check_known_keys(const json& obj, const std::string& where,
                                      const std::set<std::string>& known) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (!known.count(it.key())) {
      std::string list;
      for (const auto& k : known) {
        if (!list.empty()) list += ", ";
        list += k;
      }
      std::string message = "unknown field '" + where;
      message += it.key();
      message += "'; known fields are: ";
      message += list;
      return invalid_argument(message);
    }
  }
  return std::nullopt;
}

// Reads a JSON number within [min, max]; strings, even numeric ones, are refused.
std::optional<Error> read_number(const json& v, const std::string& field, double min, double max,
                                 double* out) {
  double d = 0;
  if (v.is_number()) {
    d = v.get<double>();
  } else {
    return field_error(field, std::string("must be a number, got ") + type_name(v) +
                                  (v.is_string() ? " \"" + v.get<std::string>() + "\"" : ""));
  }
  if (!std::isfinite(d) || d < min || d > max) {
    std::ostringstream msg;
    msg << "must be between " << min << " and " << max << ", got " << v.dump();
    return field_error(field, msg.str());
  }
  *out = d;
  return std::nullopt;
}

std::optional<Error> read_int(const json& v, const std::string& field, int64_t min, int64_t max,
                              int64_t* out) {
  if (!v.is_number_integer() && !(v.is_number_float() && std::floor(v.get<double>()) == v.get<double>())) {
    if (v.is_number()) return field_error(field, "must be a whole number, got " + v.dump());
    return field_error(field, std::string("must be a whole number, got ") + type_name(v) +
                                  (v.is_string() ? " \"" + v.get<std::string>() + "\"" : ""));
  }
  double d = v.get<double>();
  if (d < static_cast<double>(min) || d > static_cast<double>(max)) {
    return field_error(field, "must be between " + std::to_string(min) + " and " +
                                  std::to_string(max) + ", got " + v.dump());
  }
  *out = static_cast<int64_t>(d);
  return std::nullopt;
}

std::optional<Error> read_string(const json& v, const std::string& field, size_t max_bytes,
                                 std::string* out) {
  if (!v.is_string()) return field_error(field, std::string("must be a string, got ") + type_name(v));
  const auto& s = v.get_ref<const std::string&>();
  if (s.size() > max_bytes) {
    return field_error(field, "is " + std::to_string(s.size()) + " bytes; the limit is " +
                                  std::to_string(max_bytes));
  }
  if (s.find('\0') != std::string::npos) return field_error(field, "must not contain a NUL character (\\u0000)");
  *out = s;
  return std::nullopt;
}

// The first control character (C0 or DEL) in `s` as a problem for `field`, or nullopt.
std::optional<Error> control_character(const std::string& s, const std::string& field) {
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      char code[8];
      std::snprintf(code, sizeof code, "\\u%04x", c);
      return field_error(field, std::string("must be one line of text without control characters; byte ") +
                                    std::to_string(i) + " is " + code);
    }
  }
  return std::nullopt;
}

// read_string for one line of text: no control characters (names, ids, paths).
std::optional<Error> read_line(const json& v, const std::string& field, size_t max_bytes, std::string* out) {
  if (auto err = read_string(v, field, max_bytes, out)) return err;
  return control_character(*out, field);
}

// A field that is one of two words, each with what it does (on_hang, on_idle, ...):
// `*second` says whether it is the second. Absent or null: left as it is.
std::optional<Error> read_either(const json& body, const std::string& field, const std::string& first,
                                 const std::string& first_does, const std::string& second,
                                 const std::string& second_does, bool* is_second) {
  if (!body.contains(field) || body[field].is_null()) return std::nullopt;
  std::string text;
  if (auto err = read_string(body[field], field, 16, &text)) return err;
  if (text != first && text != second) {
    return field_error(field, "must be \"" + first + "\" (" + first_does + ") or \"" + second + "\" (" + second_does +
                                  "), got \"" + text + "\"");
  }
  *is_second = text == second;
  return std::nullopt;
}

std::optional<Error> read_string_map(const json& v, const std::string& field, size_t max_entries,
                                     std::map<std::string, std::string>* out, size_t max_key_bytes,
                                     size_t max_value_bytes, size_t max_total_bytes) {
  size_t total = 0;
  if (!v.is_object()) return field_error(field, std::string("must be an object of strings, got ") + type_name(v));
  if (v.size() > max_entries) {
    return field_error(field, "has " + std::to_string(v.size()) + " entries; the limit is " +
                                  std::to_string(max_entries));
  }
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (it.key().empty()) return field_error(field, "keys must not be empty");
    if (auto err = control_character(it.key(), field + " name '" + it.key().substr(0, 40) + "'")) return err;
    if (!it.value().is_string()) {
      return field_error(field + "." + it.key(),
                         std::string("must be a string, got ") + type_name(it.value()));
    }
    if (it.key().find('\0') != std::string::npos || it.value().get_ref<const std::string&>().find('\0') != std::string::npos) {
      return field_error(field, "names and values must not contain a NUL character (\\u0000)");
    }
    const size_t value_bytes = it.value().get_ref<const std::string&>().size();
    if (it.key().size() > max_key_bytes) {
      return field_error(field, "name '" + it.key().substr(0, 40) + "...' is " + std::to_string(it.key().size()) +
                                    " bytes; the limit is " + std::to_string(max_key_bytes));
    }
    if (value_bytes > max_value_bytes) {
      return field_error(field + "." + it.key(), "is " + std::to_string(value_bytes) + " bytes; the limit is " +
                                                     std::to_string(max_value_bytes));
    }
    total += it.key().size() + value_bytes;
    if (total > max_total_bytes) {
      return field_error(field, "holds more than " + std::to_string(max_total_bytes) +
                                    " bytes of names and values; the limit is " + std::to_string(max_total_bytes));
    }
    (*out)[it.key()] = it.value().get<std::string>();
  }
  return std::nullopt;
}

std::optional<Error> parse_mounts(const json& v, std::vector<Mount>* out) {
  if (!v.is_array()) {
    return field_error("runtime_env.mounts", std::string("must be a list of {\"source\", \"target\", \"read_only\"}, got ") +
                                                 type_name(v));
  }
  if (v.size() > kMaxMounts) {
    return field_error("runtime_env.mounts",
                       "has " + std::to_string(v.size()) + " mounts; the limit is " + std::to_string(kMaxMounts));
  }
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string field = "runtime_env.mounts[" + std::to_string(i) + "]";
    const json& m = v[i];
    if (!m.is_object()) return field_error(field, std::string("must be an object, got ") + type_name(m));
    if (auto err = check_known_keys(m, field + ".", {"source", "target", "read_only"})) return err;
    Mount mount;
    for (auto [key, path] : {std::pair{"source", &mount.source}, std::pair{"target", &mount.target}}) {
      if (!m.contains(key)) return field_error(field + "." + key, "is required");
      if (auto err = read_string(m[key], field + "." + key, kMaxMountPathBytes, path)) return err;
      if (std::string problem = mount_path_problem(*path); !problem.empty()) return field_error(field + "." + key, problem);
    }
    if (m.contains("read_only") && !m["read_only"].is_null()) {
      if (!m["read_only"].is_boolean()) {
        return field_error(field + ".read_only", std::string("must be true or false, got ") + type_name(m["read_only"]));
      }
      mount.read_only = m["read_only"].get<bool>();
    }
    out->push_back(std::move(mount));
  }
  if (std::string problem = mounts_problem(*out); !problem.empty()) return field_error("runtime_env.mounts", problem);
  return std::nullopt;
}

std::optional<Error> parse_runtime_env(const json& v, RuntimeEnv* env) {
  if (!v.is_object()) {
    return field_error("runtime_env", std::string("must be an object, got ") + type_name(v));
  }
  if (auto err = check_known_keys(v, "runtime_env.", {"env_vars", "working_dir", "python", "image", "mounts", "excludes"})) {
    return err;
  }
  if (v.contains("env_vars") && !v["env_vars"].is_null()) {
    if (auto err = read_string_map(v["env_vars"], "runtime_env.env_vars", kMaxEnvVars, &env->env_vars,
                                   kMaxEnvNameBytes, kMaxEnvValueBytes, kMaxEnvTotalBytes)) {
      return err;
    }
    for (const auto& [k, _] : env->env_vars) {
      if (k.find('=') != std::string::npos) {
        return field_error("runtime_env.env_vars", "name '" + k + "' must not contain '='");
      }
    }
  }
  if (v.contains("working_dir") && !v["working_dir"].is_null()) {
    if (auto err = read_line(v["working_dir"], "runtime_env.working_dir", 80, &env->working_dir)) return err;
    if (env->working_dir.rfind("sha256:", 0) != 0 || !is_sha256_hex(env->working_dir.substr(7))) {
      return field_error("runtime_env.working_dir",
                         "must name an uploaded package as \"sha256:<64 hex digits>\", got \"" + env->working_dir +
                             "\"; the SDK and `ag submit --working-dir` pack and upload a local folder for you");
    }
  }
  if (v.contains("python") && !v["python"].is_null()) {
    const json& py = v["python"];
    if (py.is_string()) {
      if (auto err = read_line(py, "runtime_env.python", kMaxPathBytes, &env->python_executable)) return err;
    } else if (py.is_object()) {
      if (auto err = check_known_keys(py, "runtime_env.python.", {"executable"})) return err;
      if (py.contains("executable")) {
        if (auto err = read_line(py["executable"], "runtime_env.python.executable", kMaxPathBytes,
                                 &env->python_executable)) {
          return err;
        }
      }
    } else {
      return field_error("runtime_env.python", std::string("must be {\"executable\": PATH}, got ") + type_name(py));
    }
    if (!env->python_executable.empty() && env->python_executable.find('\n') != std::string::npos) {
      return field_error("runtime_env.python.executable", "must be a path without newlines");
    }
  }
  if (v.contains("image") && !v["image"].is_null()) {
    if (auto err = read_string(v["image"], "runtime_env.image", kMaxImageBytes, &env->image)) return err;
    if (std::string problem = image_reference_problem(env->image); !problem.empty()) {
      return field_error("runtime_env.image", "'" + env->image + "' " + problem);
    }
  }
  if (v.contains("mounts") && !v["mounts"].is_null()) {
    if (auto err = parse_mounts(v["mounts"], &env->mounts)) return err;
    if (env->image.empty()) {
      return field_error("runtime_env.mounts",
                         "needs runtime_env.image: a task without an image runs on the node itself and already sees "
                         "its paths (give the node path directly, or run the job in an image)");
    }
  }
  if (v.contains("excludes") && !v["excludes"].is_null()) {
    const json& ex = v["excludes"];
    if (!ex.is_array()) return field_error("runtime_env.excludes", std::string("must be a list of patterns, got ") + type_name(ex));
    if (ex.size() > kMaxExcludes) {
      return field_error("runtime_env.excludes", "has " + std::to_string(ex.size()) + " patterns; the limit is " +
                                                     std::to_string(kMaxExcludes));
    }
    for (const auto& pattern : ex) {
      if (!pattern.is_string()) return field_error("runtime_env.excludes", "every pattern must be a string");
      if (auto err = control_character(pattern.get_ref<const std::string&>(), "runtime_env.excludes")) return err;
      if (pattern.get_ref<const std::string&>().size() > kMaxExcludeBytes) {
        return field_error("runtime_env.excludes", "a pattern is " +
                                                       std::to_string(pattern.get_ref<const std::string&>().size()) +
                                                       " bytes; the limit is " + std::to_string(kMaxExcludeBytes));
      }
      env->excludes.push_back(pattern.get<std::string>());
    }
  }
  return std::nullopt;
}

// "any", "node_lost", or a list of exit codes (1-255).
std::optional<Error> read_retry_on(const json& v, RetryOn* out) {
  const char* accepted = "must be \"any\", \"node_lost\" or a list of exit codes (1-255)";
  if (v.is_string()) {
    const std::string text = v.get<std::string>();
    if (text == "any") {
      *out = RetryOn{};
      return std::nullopt;
    }
    if (text == "node_lost") {
      *out = RetryOn{RetryOn::Kind::kNodeLost, {}};
      return std::nullopt;
    }
    return field_error("retry_on", std::string(accepted) + ", got \"" + text.substr(0, 64) + "\"");
  }
  if (!v.is_array()) return field_error("retry_on", std::string(accepted) + ", got " + type_name(v));
  if (v.empty() || v.size() > kMaxRetryExitCodes) {
    return field_error("retry_on", "a list of exit codes must hold 1 to " + std::to_string(kMaxRetryExitCodes) +
                                       ", got " + std::to_string(v.size()));
  }
  RetryOn on{RetryOn::Kind::kExitCodes, {}};
  for (size_t i = 0; i < v.size(); ++i) {
    int64_t code = 0;
    if (auto err = read_int(v[i], "retry_on[" + std::to_string(i) + "]", 1, 255, &code)) return err;
    on.exit_codes.push_back(static_cast<int>(code));
  }
  std::sort(on.exit_codes.begin(), on.exit_codes.end());
  on.exit_codes.erase(std::unique(on.exit_codes.begin(), on.exit_codes.end()), on.exit_codes.end());
  *out = std::move(on);
  return std::nullopt;
}

}  // namespace

Status check_queue_name(const std::string& name) {
  const bool ok = !name.empty() && name.size() <= kMaxQueueNameBytes && std::isalnum(static_cast<unsigned char>(name[0])) &&
                  std::all_of(name.begin(), name.end(), [](char c) {
                    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
                  });
  if (ok) return {};
  return invalid_argument("'" + name.substr(0, 64) + "' is not a queue name: use 1-" + std::to_string(kMaxQueueNameBytes) +
                          " of a-z, 0-9, '-' and '_', starting with a letter or digit");
}

std::optional<int> priority_level(std::string_view name) {
  if (name == "low") return -100;
  if (name == "normal") return 0;
  if (name == "high") return 100;
  if (name == "urgent") return kMaxPriority;
  return std::nullopt;
}

const char* to_string(Placement placement) {
  switch (placement) {
    case Placement::kPack: return "pack";
    case Placement::kSpread: return "spread";
  }
  return "pack";
}

std::optional<Placement> parse_placement(std::string_view text) {
  for (Placement p : {Placement::kPack, Placement::kSpread}) {
    if (text == to_string(p)) return p;
  }
  return std::nullopt;
}

std::string RuntimeEnv::working_dir_hash() const {
  return working_dir.rfind("sha256:", 0) == 0 ? working_dir.substr(7) : std::string();
}

Resources JobSpec::per_task() const {
  Resources r;
  r.cpu_millis = static_cast<int64_t>(std::llround(num_cpus * 1000));
  r.gpus = num_gpus;
  r.memory_bytes = memory_bytes;
  return r;
}

std::optional<std::string> label_problem(const std::string& key, const std::string& value) {
  auto ok = [](const std::string& text, bool slash) {
    return std::all_of(text.begin(), text.end(), [slash](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' || (slash && c == '/');
    });
  };
  if (key.empty() || key.size() > 63 || !ok(key, true)) {
    return "the key must be 1 to 63 letters, digits or . _ - /, got \"" + key.substr(0, 64) + "\"";
  }
  if (value.size() > 63 || !ok(value, false)) {
    return "the value must be up to 63 letters, digits or . _ -, got \"" + value.substr(0, 64) + "\"";
  }
  return std::nullopt;
}

int64_t JobSpec::retry_delay_ms(int retry) const {
  double delay = retry_delay_s;
  for (int i = 0; i < retry && delay < kMaxRetryDelaySeconds; ++i) delay *= 2;
  return static_cast<int64_t>(std::min(delay, kMaxRetryDelaySeconds) * 1000);
}

namespace {

// after / after_any / after_failed: lists of job ids, each at most once in all.
std::optional<Error> read_job_ids(const json& body, const char* field, std::set<std::string>& seen,
                                  std::vector<std::string>* out) {
  if (!body.contains(field) || body[field].is_null()) return std::nullopt;
  const json& v = body[field];
  if (!v.is_array()) return field_error(field, std::string("must be a list of job ids, got ") + type_name(v));
  for (const json& id : v) {
    if (!id.is_string() || !looks_like_job_id(id.get<std::string>())) {
      return field_error(field, "'" + (id.is_string() ? id.get<std::string>().substr(0, 64) : id.dump().substr(0, 64)) +
                                    "' is not a job id (job_ and 12 hex digits, as `ag list-jobs` shows)");
    }
    if (!seen.insert(id.get<std::string>()).second) {
      return field_error(field, "names " + id.get<std::string>() + " twice; give each job once, in one of after, "
                                "after_any and after_failed");
    }
    if (seen.size() > kMaxDependencies) {
      return field_error(field, "a job may depend on at most " + std::to_string(kMaxDependencies) + " jobs");
    }
    out->push_back(id.get<std::string>());
  }
  return std::nullopt;
}

std::optional<Error> parse_gates(const json& body, JobSpec* spec) {
  if (body.contains("array") && !body["array"].is_null()) {
    if (!body["array"].is_string()) {
      return field_error("array", std::string("must be a string like \"0-99%8\", got ") + type_name(body["array"]));
    }
    std::string text;
    if (auto err = read_line(body["array"], "array", kMaxArraySpecBytes, &text)) return err;
    auto array = parse_array_spec(body["array"].get<std::string>());
    if (!array.ok()) return field_error("array", array.error().message);
    spec->array = std::move(array.value());
  }
  std::set<std::string> seen;
  if (auto err = read_job_ids(body, "after", seen, &spec->after)) return err;
  if (auto err = read_job_ids(body, "after_any", seen, &spec->after_any)) return err;
  if (auto err = read_job_ids(body, "after_failed", seen, &spec->after_failed)) return err;
  if (body.contains("exclusive") && !body["exclusive"].is_null()) {
    if (!body["exclusive"].is_boolean()) {
      return field_error("exclusive", std::string("must be true or false, got ") + type_name(body["exclusive"]));
    }
    spec->exclusive = body["exclusive"].get<bool>();
  }
  if (body.contains("no_preempt") && !body["no_preempt"].is_null()) {
    if (!body["no_preempt"].is_boolean()) {
      return field_error("no_preempt", std::string("must be true or false, got ") + type_name(body["no_preempt"]));
    }
    spec->no_preempt = body["no_preempt"].get<bool>();
  }
  if (body.contains("queue") && !body["queue"].is_null()) {
    if (auto err = read_string(body["queue"], "queue", kMaxQueueNameBytes, &spec->queue)) return err;
    if (Status s = check_queue_name(spec->queue); !s) return field_error("queue", s.error().message);
  }
  if (body.contains("hold") && !body["hold"].is_null()) {
    if (!body["hold"].is_boolean()) return field_error("hold", std::string("must be true or false, got ") + type_name(body["hold"]));
    spec->hold = body["hold"].get<bool>();
  }
  if (body.contains("begin_ms") && !body["begin_ms"].is_null()) {
    // Up to the year 9999: enough for any schedule, and a mistyped unit (seconds or
    // microseconds) shows up as out of range or as 1970.
    if (auto err = read_int(body["begin_ms"], "begin_ms", 0, int64_t{253402300799000}, &spec->begin_ms)) return err;
  }
  return std::nullopt;
}

}  // namespace

Result<ArraySpec> parse_array_spec(std::string_view text) {
  const std::string forms = "; give indices like 0-99, 1,3,5, 0-98:2 (every 2nd), with %N for at most N at once (0-99%8)";
  auto number = [](std::string_view part, int* out) {
    if (part.empty() || part.size() > 7) return false;
    auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), *out);
    return ec == std::errc() && end == part.data() + part.size() && *out >= 0;
  };
  ArraySpec array;
  std::string_view items = text;
  if (const size_t percent = text.find('%'); percent != std::string_view::npos) {
    items = text.substr(0, percent);
    if (!number(text.substr(percent + 1), &array.max_running) || array.max_running < 1) {
      return invalid_argument("'" + std::string(text.substr(percent + 1)).substr(0, 32) +
                              "' after % is not a positive whole number" + forms);
    }
  }
  std::set<int> indices;
  size_t start = 0;
  while (start <= items.size()) {
    const size_t comma = std::min(items.find(',', start), items.size());
    const std::string_view item = items.substr(start, comma - start);
    start = comma + 1;
    // N, A-B or A-B:STEP.
    int first = 0, last = 0, step = 1;
    const size_t dash = item.find('-');
    bool ok = false;
    if (dash == std::string_view::npos) {
      ok = number(item, &first);
      last = first;
    } else {
      std::string_view upper = item.substr(dash + 1);
      const size_t colon = upper.find(':');
      ok = number(item.substr(0, dash), &first) && number(upper.substr(0, colon), &last) &&
           (colon == std::string_view::npos || (number(upper.substr(colon + 1), &step) && step > 0));
    }
    if (!ok) return invalid_argument("'" + std::string(item).substr(0, 32) + "' is not an index or a range" + forms);
    if (first > last) return invalid_argument("the range " + std::string(item) + " runs backwards" + forms);
    if (last > kMaxArrayIndex) {
      return invalid_argument("index " + std::to_string(last) + " is over " + std::to_string(kMaxArrayIndex) + forms);
    }
    for (int i = first; i <= last; i += step) {
      indices.insert(i);
      if (indices.size() > kMaxArraySize) {
        return invalid_argument("an array has at most " + std::to_string(kMaxArraySize) + " elements" + forms);
      }
    }
  }
  array.indices.assign(indices.begin(), indices.end());
  return array;
}

std::string to_string(const ArraySpec& array) {
  std::string out;
  for (size_t i = 0; i < array.indices.size();) {
    size_t j = i;
    while (j + 1 < array.indices.size() && array.indices[j + 1] == array.indices[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(array.indices[i]);
    if (j > i) out += "-" + std::to_string(array.indices[j]);
    i = j + 1;
  }
  if (array.max_running > 0) out += "%" + std::to_string(array.max_running);
  return out;
}

Result<JobSpec> parse_job_spec(const json& body) {
  if (!body.is_object()) {
    return invalid_argument(std::string("the job spec must be a JSON object, got ") + type_name(body));
  }
  static const std::set<std::string> kKnown = {
      "entrypoint", "num_workers", "task_options", "runtime_env", "job_name", "labels",
      "max_retries", "timeout", "timeout_per_attempt", "hang_timeout", "on_hang", "on_node_unhealthy", "idle_gpu_timeout", "on_idle", "allocation", "interactive", "hold_on_failure",
      "placement", "submission_id", "priority",
      "allow_unschedulable", "retry_delay", "retry_on", "constraints", "after", "after_any", "after_failed", "hold",
      "begin_ms", "array", "exclusive", "queue", "no_preempt"};
  if (auto err = check_known_keys(body, "", kKnown)) return *err;

  JobSpec spec;
  for (const char* flag : {"allocation", "interactive"}) {
    if (!body.contains(flag) || body[flag].is_null()) continue;
    if (!body[flag].is_boolean()) return field_error(flag, std::string("must be true or false, got ") + type_name(body[flag]));
    (std::string(flag) == "allocation" ? spec.allocation : spec.interactive) = body[flag].get<bool>();
  }
  if (spec.allocation && ((body.contains("hang_timeout") && !body["hang_timeout"].is_null()) ||
                          (body.contains("on_hang") && !body["on_hang"].is_null()))) {
    return invalid_argument("an allocation's tasks are idle until you run something in them: hang_timeout and "
                            "on_hang do not apply to it");
  }
  if (spec.allocation && spec.interactive) {
    return invalid_argument("a job is an allocation or interactive, not both: an allocation runs no command");
  }
  if (spec.allocation) {
    // Its tasks hold their places; the stored form names what they run.
    if (body.contains("entrypoint") && !body["entrypoint"].is_null() && body["entrypoint"] != kHoldingEntrypoint) {
      return field_error("entrypoint", "an allocation runs no command of its own: leave entrypoint out, and run "
                                       "commands in its tasks with `ag exec`");
    }
  } else if (!body.contains("entrypoint")) {
    return invalid_argument("field 'entrypoint' is required: the command each task runs, e.g. \"python train.py\"");
  }
  if (spec.allocation) {
    spec.entrypoint = kHoldingEntrypoint;
  } else if (auto err = read_string(body["entrypoint"], "entrypoint", kMaxEntrypointBytes, &spec.entrypoint)) {
    return *err;
  }
  if (spec.entrypoint.find_first_not_of(" \t\r\n") == std::string::npos) {
    return invalid_argument("field 'entrypoint' must not be empty");
  }
  if (body.contains("num_workers")) {
    int64_t n = 0;
    if (auto err = read_int(body["num_workers"], "num_workers", 1, kMaxNumWorkers, &n)) return *err;
    spec.num_workers = static_cast<int>(n);
  }
  if (body.contains("task_options") && !body["task_options"].is_null()) {
    const json& opts = body["task_options"];
    if (!opts.is_object()) return field_error("task_options", std::string("must be an object, got ") + type_name(opts));
    if (auto err = check_known_keys(opts, "task_options.", {"num_cpus", "num_gpus", "memory", "gpu_isolation"})) return *err;
    if (opts.contains("num_cpus")) {
      if (auto err = read_number(opts["num_cpus"], "task_options.num_cpus", kMinCpusPerTask, kMaxCpusPerTask, &spec.num_cpus)) return *err;
    }
    if (opts.contains("num_gpus")) {
      if (auto err = read_int(opts["num_gpus"], "task_options.num_gpus", 0, kMaxGpusPerTask, &spec.num_gpus)) return *err;
    }
    if (opts.contains("memory")) {
      if (auto err = read_int(opts["memory"], "task_options.memory", 0, int64_t{1} << 50, &spec.memory_bytes)) return *err;
    }
    if (opts.contains("gpu_isolation") && !opts["gpu_isolation"].is_null()) {
      if (!opts["gpu_isolation"].is_boolean()) {
        return field_error("task_options.gpu_isolation",
                           std::string("must be true or false, got ") + type_name(opts["gpu_isolation"]));
      }
      spec.gpu_isolation = opts["gpu_isolation"].get<bool>();
    }
  }
  if (body.contains("runtime_env") && !body["runtime_env"].is_null()) {
    if (auto err = parse_runtime_env(body["runtime_env"], &spec.runtime_env)) return *err;
  }
  if (body.contains("job_name") && !body["job_name"].is_null()) {
    if (auto err = read_line(body["job_name"], "job_name", kMaxNameBytes, &spec.name)) return *err;
  }
  if (body.contains("labels") && !body["labels"].is_null()) {
    if (auto err = read_string_map(body["labels"], "labels", kMaxLabels, &spec.labels, kMaxLabelKeyBytes,
                                   kMaxLabelValueBytes, kMaxLabels * (kMaxLabelKeyBytes + kMaxLabelValueBytes))) {
      return *err;
    }
    for (const auto& [key, value] : spec.labels) {
      if (auto err = control_character(value, "labels." + key)) return *err;
    }
  }
  if (body.contains("priority") && !body["priority"].is_null()) {
    spec.priority_set = true;
    const json& p = body["priority"];
    if (p.is_string()) {
      auto level = priority_level(p.get<std::string>());
      if (!level) {
        return field_error("priority", "'" + p.get<std::string>().substr(0, 64) +
                                           "' is not a priority; give low, normal, high, urgent or a whole number from " +
                                           std::to_string(kMinPriority) + " to " + std::to_string(kMaxPriority));
      }
      spec.priority = *level;
    } else {
      int64_t n = 0;
      if (auto err = read_int(p, "priority", kMinPriority, kMaxPriority, &n)) return *err;
      spec.priority = static_cast<int>(n);
    }
  }
  if (body.contains("max_retries")) {
    int64_t n = 0;
    if (auto err = read_int(body["max_retries"], "max_retries", 0, kMaxRetries, &n)) return *err;
    spec.max_retries = static_cast<int>(n);
  }
  if (body.contains("retry_delay") && !body["retry_delay"].is_null()) {
    if (auto err = read_number(body["retry_delay"], "retry_delay", 0, kMaxRetryDelaySeconds, &spec.retry_delay_s)) {
      return *err;
    }
  }
  if (body.contains("constraints") && !body["constraints"].is_null()) {
    if (auto err = read_string_map(body["constraints"], "constraints", kMaxConstraints, &spec.constraints, 64, 64,
                                   kMaxConstraints * 128)) {
      return *err;
    }
    for (const auto& [key, value] : spec.constraints) {
      if (auto problem = label_problem(key, value)) return field_error("constraints." + key.substr(0, 64), *problem);
    }
  }
  if (body.contains("retry_on") && !body["retry_on"].is_null()) {
    if (auto err = read_retry_on(body["retry_on"], &spec.retry_on)) return *err;
  }
  if (body.contains("timeout") && !body["timeout"].is_null()) {
    double t = 0;
    if (auto err = read_number(body["timeout"], "timeout", 0.001, kMaxTimeoutSeconds, &t)) return *err;
    spec.timeout_s = t;
  }
  if (body.contains("timeout_per_attempt") && !body["timeout_per_attempt"].is_null()) {
    if (!body["timeout_per_attempt"].is_boolean()) {
      return field_error("timeout_per_attempt", std::string("must be true or false, got ") + type_name(body["timeout_per_attempt"]));
    }
    spec.timeout_per_attempt = body["timeout_per_attempt"].get<bool>();
  }
  if (body.contains("hang_timeout") && !body["hang_timeout"].is_null()) {
    double t = 0;
    if (auto err = read_number(body["hang_timeout"], "hang_timeout", 1, kMaxTimeoutSeconds, &t)) return *err;
    spec.hang_timeout_s = t;
  }
  if (body.contains("hold_on_failure") && !body["hold_on_failure"].is_null()) {
    double t = 0;
    if (auto err = read_number(body["hold_on_failure"], "hold_on_failure", 1, kMaxHoldOnFailureSeconds, &t)) return *err;
    spec.hold_on_failure_s = t;
  }
  if (auto err = read_either(body, "on_hang", "stacks", "record the hang and every rank's stacks", "fail",
                             "that, then end the attempt, retried if allowed", &spec.fail_on_hang)) {
    return *err;
  }
  if (body.contains("idle_gpu_timeout") && !body["idle_gpu_timeout"].is_null()) {
    double t = 0;
    if (auto err = read_number(body["idle_gpu_timeout"], "idle_gpu_timeout", 1, kMaxTimeoutSeconds, &t)) return *err;
    spec.idle_gpu_timeout_s = t;
  }
  if (auto err = read_either(body, "on_idle", "event", "say so in the job's events", "stop", "that, then stop the job",
                             &spec.stop_on_idle)) {
    return *err;
  }
  if (auto err = read_either(body, "on_node_unhealthy", "keep", "run on", "requeue",
                             "stop the gang and queue it again, not counted against max_retries",
                             &spec.requeue_on_unhealthy)) {
    return *err;
  }
  if (body.contains("placement") && !body["placement"].is_null()) {
    std::string text;
    if (auto err = read_string(body["placement"], "placement", 16, &text)) return *err;
    std::optional<Placement> placement = parse_placement(text);
    if (!placement) return field_error("placement", "must be \"pack\" or \"spread\", got \"" + text + "\"");
    spec.placement = *placement;
  }
  if (body.contains("submission_id") && !body["submission_id"].is_null()) {
    if (auto err = read_line(body["submission_id"], "submission_id", 128, &spec.submission_id)) return *err;
    if (spec.submission_id.find('/') != std::string::npos) {
      return field_error("submission_id", "must not contain '/': it names the job in URLs (/api/jobs/ID)");
    }
  }
  if (body.contains("allow_unschedulable") && !body["allow_unschedulable"].is_null()) {
    if (!body["allow_unschedulable"].is_boolean()) {
      return field_error("allow_unschedulable",
                         std::string("must be true or false, got ") + type_name(body["allow_unschedulable"]));
    }
    spec.allow_unschedulable = body["allow_unschedulable"].get<bool>();
  }
  if (auto err = parse_gates(body, &spec)) return *err;
  return spec;
}

json to_json(const JobSpec& spec) {
  json j;
  j["entrypoint"] = spec.entrypoint;
  j["num_workers"] = spec.num_workers;
  j["task_options"] = {{"num_cpus", spec.num_cpus}, {"num_gpus", spec.num_gpus},
                       {"memory", spec.memory_bytes}, {"gpu_isolation", spec.gpu_isolation}};
  j["runtime_env"] = json::object();
  const RuntimeEnv& env = spec.runtime_env;
  if (!env.env_vars.empty()) j["runtime_env"]["env_vars"] = env.env_vars;
  if (!env.working_dir.empty()) j["runtime_env"]["working_dir"] = env.working_dir;
  if (!env.python_executable.empty()) j["runtime_env"]["python"] = {{"executable", env.python_executable}};
  if (!env.image.empty()) j["runtime_env"]["image"] = env.image;
  if (!env.mounts.empty()) {
    json mounts = json::array();
    for (const auto& m : env.mounts) {
      mounts.push_back({{"source", m.source}, {"target", m.target}, {"read_only", m.read_only}});
    }
    j["runtime_env"]["mounts"] = std::move(mounts);
  }
  if (!env.excludes.empty()) j["runtime_env"]["excludes"] = env.excludes;
  j["job_name"] = spec.name;
  j["labels"] = spec.labels;
  j["max_retries"] = spec.max_retries;
  if (spec.priority_set || spec.priority != 0) j["priority"] = spec.priority;
  j["retry_delay"] = spec.retry_delay_s;
  switch (spec.retry_on.kind) {
    case RetryOn::Kind::kAny: j["retry_on"] = "any"; break;
    case RetryOn::Kind::kNodeLost: j["retry_on"] = "node_lost"; break;
    case RetryOn::Kind::kExitCodes: j["retry_on"] = spec.retry_on.exit_codes; break;
  }
  j["timeout"] = spec.timeout_s ? json(*spec.timeout_s) : json(nullptr);
  if (spec.timeout_per_attempt) j["timeout_per_attempt"] = true;
  if (spec.hang_timeout_s) j["hang_timeout"] = *spec.hang_timeout_s;
  if (spec.fail_on_hang) j["on_hang"] = "fail";
  if (spec.requeue_on_unhealthy) j["on_node_unhealthy"] = "requeue";
  if (spec.idle_gpu_timeout_s) j["idle_gpu_timeout"] = *spec.idle_gpu_timeout_s;
  if (spec.stop_on_idle) j["on_idle"] = "stop";
  if (spec.hold_on_failure_s) j["hold_on_failure"] = *spec.hold_on_failure_s;
  if (spec.allocation) j["allocation"] = true;
  if (spec.interactive) j["interactive"] = true;
  j["placement"] = to_string(spec.placement);
  if (!spec.submission_id.empty()) j["submission_id"] = spec.submission_id;
  if (spec.allow_unschedulable) j["allow_unschedulable"] = true;
  if (!spec.constraints.empty()) j["constraints"] = spec.constraints;
  if (!spec.after.empty()) j["after"] = spec.after;
  if (!spec.after_any.empty()) j["after_any"] = spec.after_any;
  if (!spec.after_failed.empty()) j["after_failed"] = spec.after_failed;
  if (spec.hold) j["hold"] = true;
  if (spec.exclusive) j["exclusive"] = true;
  if (!spec.queue.empty()) j["queue"] = spec.queue;
  if (spec.no_preempt) j["no_preempt"] = true;
  if (spec.begin_ms != 0) j["begin_ms"] = spec.begin_ms;
  if (spec.array) j["array"] = to_string(*spec.array);
  return j;
}

const std::string& task_entrypoint(const JobSpec& spec, int task_index) {
  static const std::string holding = kHoldingEntrypoint;
  return spec.interactive && task_index == 0 ? holding : spec.entrypoint;
}

}  // namespace ag::api
