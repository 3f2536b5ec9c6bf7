// PostgresStore: KvStore on a PostgreSQL database, for heads that share one store. The
// records live in one table, ag_records(tbl, key, value bytea), keys ordered bytewise
// ("C" collation) as SQLite orders them; ag_lease holds the leader's lease and
// ag_schema the layout's version. Writes go through a GroupWriter (group_writer.h) on a
// connection of their own; reads and the lease take a second one. libpq is loaded at
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

// Who holds the lease: its holder and epoch, and whether it has not yet run out (on the
// database's clock). An empty holder: nobody ever took it.
struct LeaseState {
  std::string holder;
  int64_t epoch = 0;
  bool live = false;
};

class PostgresStore final : public KvStore {
 public:
  // Errors: kUnavailable when libpq is missing, the server cannot be reached or refuses
  // the login (the server's words, never the password); kConflict when the
  // database holds another version of the layout; kInternal when the tables cannot be
  // made.
  static Result<std::unique_ptr<PostgresStore>> open(const PostgresOptions& options);
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
  // The lease as the database sees it now. Errors: the store's.
  Result<LeaseState> read_lease();
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
