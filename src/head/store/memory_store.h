// MemoryStore: an in-memory KvStore for unit tests, applied synchronously (done runs
// inside write()). fail_next_writes(n) makes the next n batches fail with
// kResourceExhausted, as a full disk would; hold_writes() keeps batches unstored and
// unanswered until release_writes(), as a slow disk would.
#pragma once

#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "head/store/kv_store.h"

namespace ag::store {

class MemoryStore final : public KvStore {
 public:
  void write(std::vector<Mutation> batch, std::function<void(Status)> done) override;
  Result<std::vector<Record>> scan(const std::string& table) override;
  Result<std::vector<std::string>> tables() override;
  Result<std::optional<std::string>> get(const std::string& table, const std::string& key) override;
  void flush() override {}

  void fail_next_writes(int count);
  void hold_writes();
  // Stores and answers the batches held, in order; later ones are written at once.
  void release_writes();
  // Batches written so far (failed ones included).
  int64_t writes() const { return writes_; }

 private:
  std::mutex mu_;
  std::map<std::string, std::map<std::string, std::string>> tables_;
  int failures_left_ = 0;
  bool holding_ = false;
  std::vector<std::pair<std::vector<Mutation>, std::function<void(Status)>>> held_;
  int64_t writes_ = 0;
};

}  // namespace ag::store
