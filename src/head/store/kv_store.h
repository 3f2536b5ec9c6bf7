// KvStore: the head's durable record store, a small table/key/value interface under
// the typed job and event records (head/jobs/job_codec.h).
//
//   JobWriter --write(batch, done)--> queue --writer thread--> one transaction per group
//                                                                 --> done(status) per batch
//
// Writes are grouped: every batch queued while the previous transaction committed goes
// into the next one, so a burst of submissions pays one fsync, not one each. Backends:
// SqliteStore (the product) and MemoryStore (unit tests; can fail writes on demand). A
// Redis- or etcd-backed store for a highly available head would implement the same
// interface and pass the same contract test (tests/unit/store/kv_store_test.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/result.h"

namespace ag::store {

// The tables the head uses. Keys sort lexicographically within a table.
inline constexpr const char* kJobsTable = "jobs";
inline constexpr const char* kEventsTable = "events";
inline constexpr const char* kMetaTable = "meta";

struct Mutation {
  std::string table;
  std::string key;
  std::optional<std::string> value;  // nullopt deletes the key
};

using Record = std::pair<std::string, std::string>;  // key, value

// How long the store's transactions took, as a histogram over fixed bounds (seconds):
// what /metrics exports as ag_store_write_seconds.
struct CommitTimes {
  std::vector<double> upper_bounds;
  std::vector<uint64_t> counts;  // one per bound, not cumulative
  double sum_s = 0;
  uint64_t count = 0;
};

class KvStore {
 public:
  virtual ~KvStore() = default;

  // Queues `batch` to be applied atomically. `done` is called exactly once, on the
  // store's writer thread, after the batch is durable (ok) or could not be written
  // (kResourceExhausted when the disk is full, kInternal otherwise; nothing of the
  // batch is applied then). Thread-safe.
  virtual void write(std::vector<Mutation> batch, std::function<void(Status)> done) = 0;

  // Every record of `table`, sorted by key. Thread-safe; sees all writes whose `done`
  // has been called. Errors: kInternal when the backend cannot be read.
  virtual Result<std::vector<Record>> scan(const std::string& table) = 0;

  // The names of the tables that hold at least one record, sorted. Same guarantees as
  // scan().
  virtual Result<std::vector<std::string>> tables() = 0;

  // One record, or nullopt when the key is absent. Same guarantees as scan().
  virtual Result<std::optional<std::string>> get(const std::string& table,
                                                 const std::string& key) = 0;

  // Blocks until every write queued so far is durable and its `done` has run.
  virtual void flush() = 0;

  // The durations of the transactions committed so far (empty for a store without
  // transactions). Thread-safe.
  virtual CommitTimes commit_times() const { return {}; }
};

}  // namespace ag::store
