// PostgresStore: KvStore on a PostgreSQL database, for heads that share one store. The
// records live in one table, ag_records(tbl, key, value bytea), keys ordered bytewise
// ("C" collation) as SQLite orders them; ag_lease holds the leader's lease and
// ag_schema the layout's version. Writes go through a GroupWriter (group_writer.h) on a
// connection of their own; reads take a second one and the lease a third. libpq is loaded at
// run time (libpq.h).
//
// Lifecycle: open() connects, makes the tables on an empty database (or checks their
// version) and starts the writer; the destructor drains the queue and stops it. Every
// method is thread-safe. A connection lost (the server restarted) is made again on the
// next call.
#pragma once

#include <memory>
#include <string>

#include "head/store/kv_store.h"
#include "head/store/lease.h"

namespace ag::store {

struct PostgresOptions {
  std::string conninfo;   // a postgresql:// URL or a key=value string
  std::string password;   // "" leaves it to libpq (PGPASSWORD, ~/.pgpass)
  int connect_timeout_s = 5;
  // A query on a connection that stopped answering fails after this long (TCP user
  // timeout and keepalives), so that no thread waits on a dead network for hours.
  int network_timeout_s = 10;
};

// The layout of the tables this version of AetherGrid reads and writes.
inline constexpr int kPostgresSchemaVersion = 1;

class PostgresStore final : public KvStore, public LeaseBackend {
 public:
  // Errors: kUnavailable when libpq is missing, the server cannot be reached or refuses
  // the login (the server's words, never the password); kConflict when the
  // database holds another version of the layout; kInternal when the tables cannot be
  // made.
  static Result<std::unique_ptr<PostgresStore>> open(const PostgresOptions& options);
  ~PostgresStore() override;

  void write(std::vector<Mutation> batch, std::function<void(Status)> done) override;
  Result<std::vector<Record>> scan(const std::string& table) override;
  Result<std::vector<std::string>> tables() override;
  Result<std::optional<std::string>> get(const std::string& table, const std::string& key) override;
  void flush() override;
  CommitTimes commit_times() const override;

  // Number of transactions committed so far (group commit makes this < batches).
  uint64_t commits() const;

  // The lease (lease.h), in the table ag_lease; fence() makes every write check, in its
  // own transaction, that the lease still holds (the row locked until it commits, so a
  // takeover waits for it).
  Result<std::optional<int64_t>> acquire_lease(const std::string& holder, int64_t ttl_ms) override;
  Result<bool> renew_lease(const std::string& holder, int64_t epoch, int64_t ttl_ms) override;
  Status release_lease(const std::string& holder, int64_t epoch) override;
  Result<LeaseState> read_lease() override;
  void fence(const std::string& holder, int64_t epoch) override;

 private:
  struct Impl;
  explicit PostgresStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ag::store
