// PostgresStore: KvStore on a PostgreSQL database (libpq), for heads that share one
// store. The records live in one table, records(tbl, key, value bytea), keys ordered
// bytewise ("C" collation) as SQLite orders them. Writes go through a GroupWriter
// (group_writer.h) on a connection of their own; reads take a second connection.
//
// Lifecycle: open() connects (libpq's connection string or URI; the password from the
// string, PGPASSWORD or ~/.pgpass), creates the table if missing and starts the writer;
// the destructor drains the queue and stops it. Every method is thread-safe.
#pragma once

#include <memory>
#include <string>

#include "head/store/kv_store.h"

namespace ag::store {

class PostgresStore final : public KvStore {
 public:
  // Errors: kUnavailable when the server cannot be reached or refuses the login (the
  // message is the server's, without the password); kInternal when the table cannot be
  // made.
  static Result<std::unique_ptr<PostgresStore>> open(const std::string& conninfo);
  ~PostgresStore() override;

  void write(std::vector<Mutation> batch, std::function<void(Status)> done) override;
  Result<std::vector<Record>> scan(const std::string& table) override;
  Result<std::optional<std::string>> get(const std::string& table, const std::string& key) override;
  void flush() override;

  // Number of transactions committed so far (group commit makes this < batches).
  uint64_t commits() const;

  // Leadership among the heads sharing the store: one lease row (holder, epoch, expiry
  // on the database's clock, so that no head's clock matters). The epoch rises by one at
  // every takeover: it is the fencing token.
  //
  // Takes the lease for `holder` for `ttl_ms` when nobody holds it or it ran out; the
  // new epoch, or nullopt while another holds it. Errors: the store's (kUnavailable).
  Result<std::optional<int64_t>> acquire_lease(const std::string& holder, int64_t ttl_ms);
  // Extends the lease of (`holder`, `epoch`) by `ttl_ms` from now; false when it is no
  // longer theirs (it ran out, or another head took it). Errors: the store's.
  Result<bool> renew_lease(const std::string& holder, int64_t epoch, int64_t ttl_ms);
  // From now on a write commits only if (`holder`, `epoch`) still holds a lease that has
  // not run out, checked in the write's own transaction (the lease row locked until it
  // commits, so a takeover waits for it); otherwise it fails kUnavailable and applies
  // nothing.
  void fence(const std::string& holder, int64_t epoch);

 private:
  struct Impl;
  explicit PostgresStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ag::store
