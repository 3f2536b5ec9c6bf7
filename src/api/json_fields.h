// Reading the protocol's JSON messages field by field (api/protocol.cc,
// api/log_frame.cc): one reader per object, typed values, errors named by their path.
// Include it only from .cc files: it brings nlohmann/json.
#pragma once

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "api/protocol.h"

namespace ag::api::wire {

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

}  // namespace ag::api::wire
