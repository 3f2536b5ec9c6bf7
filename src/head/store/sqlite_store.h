// SqliteStore: KvStore on an SQLite database in WAL mode with synchronous=FULL, written
// by one writer thread that commits queued batches in groups (group_writer.h).
//
// Lifecycle: open() creates or opens the file and starts the writer thread; the
// destructor drains the queue and stops it. Every method is thread-safe.
#pragma once

#include <memory>
#include <string>

#include "head/store/kv_store.h"

namespace ag::store {

class SqliteStore final : public KvStore {
 public:
  // Opens (creating if needed) the database at `path`. Errors: kInternal with SQLite's
  // message when the file cannot be opened or is not an AetherGrid database.
  static Result<std::unique_ptr<SqliteStore>> open(const std::string& path);
  ~SqliteStore() override;

  void write(std::vector<Mutation> batch, std::function<void(Status)> done) override;
  Result<std::vector<Record>> scan(const std::string& table) override;
  Result<std::vector<std::string>> tables() override;
  Result<std::optional<std::string>> get(const std::string& table, const std::string& key) override;
  void flush() override;
  CommitTimes commit_times() const override;

  // Number of transactions committed so far (group commit makes this < batches).
  uint64_t commits() const;

 private:
  struct Impl;
  explicit SqliteStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ag::store
