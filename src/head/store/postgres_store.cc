#include "head/store/postgres_store.h"

#include <memory>
#include <mutex>
#include <optional>
#include <utility>

#include "head/store/group_writer.h"
#include "head/store/libpq.h"

namespace ag::store {
namespace {

// A query's result that clears itself.
class PgResult {
 public:
  PgResult(const LibPq& pq, PGresult* result) : pq_(pq), result_(result) {}
  ~PgResult() { pq_.PQclear(result_); }
  PgResult(const PgResult&) = delete;
  PgResult& operator=(const PgResult&) = delete;
  PGresult* get() const { return result_; }
  bool ok() const {
    const ExecStatusType status = pq_.PQresultStatus(result_);
    return status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK;
  }
  int rows() const { return pq_.PQntuples(result_); }
  std::string column(int row, int col) const {
    return {pq_.PQgetvalue(result_, row, col), static_cast<size_t>(pq_.PQgetlength(result_, row, col))};
  }

 private:
  const LibPq& pq_;
  PGresult* result_;
};

// One connection and what runs on it.
class Connection {
 public:
  Connection(const LibPq& pq, PGconn* conn) : pq_(pq), conn_(conn) {
    // The server's notices ("relation already exists, skipping") are not for the head's log.
    pq_.PQsetNoticeProcessor(conn_, [](void*, const char*) {}, nullptr);
  }
  ~Connection() { pq_.PQfinish(conn_); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  bool connected() const { return pq_.PQstatus(conn_) == CONNECTION_OK; }
  // A connection the server dropped (it restarted) is made again before the next query.
  void revive() {
    if (!connected()) pq_.PQreset(conn_);
  }

  Error error(const std::string& what) const {
    std::string message = pq_.PQerrorMessage(conn_);
    while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
    // A connection gone is the store being unreachable; a full disk on the server says so.
    const bool full = message.find("No space left") != std::string::npos ||
                      message.find("could not extend file") != std::string::npos;
    return {!connected() ? ErrorCode::kUnavailable : full ? ErrorCode::kResourceExhausted : ErrorCode::kInternal,
            what + ": " + message};
  }

  // Runs `sql` with text parameters (a null one as NULL; `binary` ones as bytea).
  PgResult run(const char* sql, const std::vector<const std::string*>& params, const std::vector<int>& binary = {}) {
    std::vector<const char*> values;
    std::vector<int> lengths, formats;
    for (size_t i = 0; i < params.size(); ++i) {
      values.push_back(params[i] ? params[i]->data() : nullptr);
      lengths.push_back(params[i] ? static_cast<int>(params[i]->size()) : 0);
      formats.push_back(i < binary.size() ? binary[i] : 0);
    }
    // Binary results: bytea values come back as their bytes, text as text.
    return {pq_, pq_.PQexecParams(conn_, sql, static_cast<int>(params.size()), nullptr, values.data(),
                                  lengths.data(), formats.data(), 1)};
  }

  Status exec(const char* sql) {
    PgResult result(pq_, pq_.PQexec(conn_, sql));
    if (!result.ok()) return error(sql);
    return {};
  }

 private:
  const LibPq& pq_;
  PGconn* conn_;
};

Result<std::unique_ptr<Connection>> connect(const LibPq& pq, const PostgresOptions& options) {
  const std::string connect_timeout = std::to_string(options.connect_timeout_s);
  const std::string user_timeout = std::to_string(options.network_timeout_s * 1000);
  const std::string keepalive_idle = std::to_string(std::max(1, options.network_timeout_s / 3));
  std::vector<const char*> keys{"dbname", "connect_timeout", "tcp_user_timeout", "keepalives_idle",
                                "keepalives_interval", "keepalives_count", "application_name"};
  std::vector<const char*> values{options.conninfo.c_str(), connect_timeout.c_str(), user_timeout.c_str(),
                                  keepalive_idle.c_str(), "2", "3", "aethergrid-head"};
  if (!options.password.empty()) {
    keys.push_back("password");
    values.push_back(options.password.c_str());
  }
  keys.push_back(nullptr);
  values.push_back(nullptr);
  // expand_dbname: the first value may be a whole URL or key=value string; the later
  // keys override what it says.
  auto conn = std::make_unique<Connection>(pq, pq.PQconnectdbParams(keys.data(), values.data(), 1));
  if (!conn->connected()) {
    return Error{ErrorCode::kUnavailable, "cannot reach the store: " + conn->error("connecting").message};
  }
  return conn;
}

constexpr const char* kUpsert =
    "INSERT INTO ag_records(tbl, key, value) VALUES($1, $2, $3) "
    "ON CONFLICT (tbl, key) DO UPDATE SET value = excluded.value";
constexpr const char* kDelete = "DELETE FROM ag_records WHERE tbl = $1 AND key = $2";
constexpr const char* kAcquire =
    "INSERT INTO ag_lease(name, holder, epoch, expires_at) "
    "VALUES('head', $1, 1, now() + $2::bigint * interval '1 millisecond') "
    "ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, epoch = ag_lease.epoch + 1, "
    "expires_at = excluded.expires_at WHERE ag_lease.expires_at <= now() RETURNING epoch::text";
constexpr const char* kRenew =
    "UPDATE ag_lease SET expires_at = now() + $3::bigint * interval '1 millisecond' "
    "WHERE name = 'head' AND holder = $1 AND epoch = $2::bigint AND expires_at > now() RETURNING epoch::text";
constexpr const char* kHolds =
    "SELECT epoch FROM ag_lease WHERE name = 'head' AND holder = $1 AND epoch = $2::bigint AND expires_at > now() "
    "FOR SHARE";
constexpr const char* kReadLease =
    "SELECT holder, epoch::text, (expires_at > now())::text FROM ag_lease WHERE name = 'head'";

// Makes the tables on an empty database, or checks that they are of this version; in
// one transaction under a transaction-scoped lock, so that heads starting together do
// not race.
Status prepare(Connection& conn) {
  if (Status s = conn.exec("BEGIN"); !s) return s;
  auto fail = [&conn](const Error& error) -> Status {
    (void)conn.exec("ROLLBACK");
    return error;
  };
  for (const char* sql : {"SELECT pg_advisory_xact_lock(7406071)",
                          "CREATE TABLE IF NOT EXISTS ag_schema(version INT NOT NULL)"}) {
    if (Status s = conn.exec(sql); !s) return fail(s.error());
  }
  PgResult version = conn.run("SELECT version::text FROM ag_schema", {});
  if (!version.ok()) return fail(conn.error("reading the store's version"));
  const std::string ours = std::to_string(kPostgresSchemaVersion);
  if (version.rows() > 0 && version.column(0, 0) != ours) {
    return fail(Error{ErrorCode::kConflict, "the store's tables are of layout version " + version.column(0, 0) +
                                                 "; this ag reads version " + ours +
                                                 ": point --store at another database, or run the ag that made it"});
  }
  if (version.rows() == 0) {
    for (const char* sql :
         {"CREATE TABLE IF NOT EXISTS ag_records(tbl TEXT COLLATE \"C\" NOT NULL, key TEXT COLLATE \"C\" NOT NULL, "
          "value BYTEA NOT NULL, PRIMARY KEY(tbl, key))",
          "CREATE TABLE IF NOT EXISTS ag_lease(name TEXT PRIMARY KEY, holder TEXT NOT NULL, epoch BIGINT NOT NULL, "
          "expires_at TIMESTAMPTZ NOT NULL)"}) {
      if (Status s = conn.exec(sql); !s) return fail(s.error());
    }
    PgResult inserted = conn.run("INSERT INTO ag_schema(version) VALUES($1::int)", {&ours});
    if (!inserted.ok()) return fail(conn.error("recording the store's version"));
  }
  return conn.exec("COMMIT");
}

}  // namespace

struct PostgresStore::Impl {
  const LibPq* pq = nullptr;
  std::unique_ptr<Connection> writer_conn;  // the writer thread's only (after open)
  std::unique_ptr<Connection> reader_conn;  // guarded by reader_mu
  std::mutex reader_mu;
  // The lease's own, so that a renewal never waits behind a long read.
  std::unique_ptr<Connection> lease_conn;  // guarded by lease_mu
  std::mutex lease_mu;
  std::mutex fence_mu;  // guards the fence
  std::optional<std::pair<std::string, int64_t>> fence;  // (holder, epoch) every write must hold
  std::unique_ptr<GroupWriter> writer;

  ~Impl() { writer.reset(); }  // drains the queue before the connections close

  Status apply(const std::vector<Mutation>& batch) {
    for (const auto& m : batch) {
      PgResult result = m.value ? writer_conn->run(kUpsert, {&m.table, &m.key, &*m.value}, {0, 0, 1})
                                : writer_conn->run(kDelete, {&m.table, &m.key});
      if (!result.ok()) return writer_conn->error("writing " + m.table + "/" + m.key);
    }
    return {};
  }

  // Inside the write's transaction: the lease this store was fenced with still holds
  // (and stays locked until the transaction ends).
  Status check_fence() {
    std::optional<std::pair<std::string, int64_t>> mine;
    {
      std::lock_guard lock(fence_mu);
      mine = fence;
    }
    if (!mine) return {};
    const std::string epoch = std::to_string(mine->second);
    PgResult held = writer_conn->run(kHolds, {&mine->first, &epoch});
    if (!held.ok()) return writer_conn->error("checking the lease");
    if (held.rows() == 0) {
      return Error{ErrorCode::kUnavailable, "this head no longer leads the store (its lease, epoch " + epoch +
                                                ", ran out or another head took it over); nothing was written"};
    }
    return {};
  }

  // GroupWriter's commit: every batch in one transaction.
  Status commit(const std::vector<const std::vector<Mutation>*>& batches) {
    writer_conn->revive();
    if (Status s = writer_conn->exec("BEGIN"); !s) return s;
    auto rollback = [this](Status s) {
      (void)writer_conn->exec("ROLLBACK");
      return s;
    };
    if (Status s = check_fence(); !s) return rollback(s);
    for (const auto* batch : batches) {
      if (Status s = apply(*batch); !s) return rollback(s);
    }
    if (Status s = writer_conn->exec("COMMIT"); !s) return rollback(s);
    return {};
  }
};

PostgresStore::PostgresStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PostgresStore::~PostgresStore() = default;

Result<std::unique_ptr<PostgresStore>> PostgresStore::open(const PostgresOptions& options) {
  auto pq = libpq();
  if (!pq.ok()) return pq.error();
  auto impl = std::make_unique<Impl>();
  impl->pq = pq.value();
  for (auto* slot : {&impl->writer_conn, &impl->reader_conn, &impl->lease_conn}) {
    auto conn = connect(*impl->pq, options);
    if (!conn.ok()) return conn.error();
    *slot = std::move(conn.value());
  }
  if (Status s = prepare(*impl->writer_conn); !s) {
    if (s.error().code == ErrorCode::kConflict) return s.error();
    return Error{ErrorCode::kInternal, "preparing the store: " + s.error().message};
  }
  Impl* raw = impl.get();
  impl->writer = std::make_unique<GroupWriter>([raw](const auto& batches) { return raw->commit(batches); });
  return std::unique_ptr<PostgresStore>(new PostgresStore(std::move(impl)));
}

void PostgresStore::write(std::vector<Mutation> batch, std::function<void(Status)> done) {
  impl_->writer->write(std::move(batch), std::move(done));
}

Result<std::vector<Record>> PostgresStore::scan(const std::string& table) {
  std::lock_guard lock(impl_->reader_mu);
  Connection& conn = *impl_->reader_conn;
  conn.revive();
  PgResult result = conn.run("SELECT key, value FROM ag_records WHERE tbl = $1 ORDER BY key", {&table});
  if (!result.ok()) return conn.error("scanning " + table);
  std::vector<Record> out;
  out.reserve(static_cast<size_t>(result.rows()));
  for (int i = 0; i < result.rows(); ++i) out.emplace_back(result.column(i, 0), result.column(i, 1));
  return out;
}

Result<std::vector<std::string>> PostgresStore::tables() {
  std::lock_guard lock(impl_->reader_mu);
  Connection& conn = *impl_->reader_conn;
  conn.revive();
  PgResult result = conn.run("SELECT DISTINCT tbl FROM ag_records ORDER BY tbl", {});
  if (!result.ok()) return conn.error("listing tables");
  std::vector<std::string> out;
  for (int i = 0; i < result.rows(); ++i) out.push_back(result.column(i, 0));
  return out;
}

Result<std::optional<std::string>> PostgresStore::get(const std::string& table, const std::string& key) {
  std::lock_guard lock(impl_->reader_mu);
  Connection& conn = *impl_->reader_conn;
  conn.revive();
  PgResult result = conn.run("SELECT value FROM ag_records WHERE tbl = $1 AND key = $2", {&table, &key});
  if (!result.ok()) return conn.error("reading " + table + "/" + key);
  if (result.rows() == 0) return std::optional<std::string>();
  return std::optional<std::string>(result.column(0, 0));
}

void PostgresStore::flush() { impl_->writer->flush(); }

uint64_t PostgresStore::commits() const { return impl_->writer->commits(); }

CommitTimes PostgresStore::commit_times() const { return impl_->writer->commit_times(); }

Result<std::optional<int64_t>> PostgresStore::acquire_lease(const std::string& holder, int64_t ttl_ms) {
  std::lock_guard lock(impl_->lease_mu);
  Connection& conn = *impl_->lease_conn;
  conn.revive();
  const std::string ttl = std::to_string(ttl_ms);
  PgResult result = conn.run(kAcquire, {&holder, &ttl});
  if (!result.ok()) return conn.error("taking the lease");
  if (result.rows() == 0) return std::optional<int64_t>();
  return std::optional<int64_t>(std::stoll(result.column(0, 0)));
}

Result<bool> PostgresStore::renew_lease(const std::string& holder, int64_t epoch, int64_t ttl_ms) {
  std::lock_guard lock(impl_->lease_mu);
  Connection& conn = *impl_->lease_conn;
  conn.revive();
  const std::string epoch_text = std::to_string(epoch), ttl = std::to_string(ttl_ms);
  PgResult result = conn.run(kRenew, {&holder, &epoch_text, &ttl});
  if (!result.ok()) return conn.error("renewing the lease");
  return result.rows() > 0;
}

Status PostgresStore::release_lease(const std::string& holder, int64_t epoch) {
  std::lock_guard lock(impl_->lease_mu);
  Connection& conn = *impl_->lease_conn;
  conn.revive();
  const std::string epoch_text = std::to_string(epoch);
  PgResult result = conn.run(
      "UPDATE ag_lease SET expires_at = now() WHERE name = 'head' AND holder = $1 AND epoch = $2::bigint", {&holder,
                                                                                                             &epoch_text});
  if (!result.ok()) return conn.error("releasing the lease");
  return {};
}

Result<LeaseState> PostgresStore::read_lease() {
  std::lock_guard lock(impl_->lease_mu);
  Connection& conn = *impl_->lease_conn;
  conn.revive();
  PgResult result = conn.run(kReadLease, {});
  if (!result.ok()) return conn.error("reading the lease");
  LeaseState state;
  if (result.rows() > 0) {
    state.holder = result.column(0, 0);
    state.epoch = std::stoll(result.column(0, 1));
    state.live = result.column(0, 2) == "true";
  }
  return state;
}

void PostgresStore::fence(const std::string& holder, int64_t epoch) {
  std::lock_guard lock(impl_->fence_mu);
  impl_->fence = std::make_pair(holder, epoch);
}

}  // namespace ag::store
