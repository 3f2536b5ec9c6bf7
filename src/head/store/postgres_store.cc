#include "head/store/postgres_store.h"

#include <libpq-fe.h>

#include <memory>
#include <mutex>
#include <optional>
#include <utility>

#include "head/store/group_writer.h"

namespace ag::store {
namespace {

// A query's result that clears itself.
class PgResult {
 public:
  explicit PgResult(PGresult* result) : result_(result) {}
  ~PgResult() { PQclear(result_); }
  PgResult(const PgResult&) = delete;
  PgResult& operator=(const PgResult&) = delete;
  PGresult* get() const { return result_; }
  bool ok() const {
    const ExecStatusType status = PQresultStatus(result_);
    return status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK;
  }

 private:
  PGresult* result_;
};

Error pg_error(PGconn* conn, const std::string& what) {
  std::string message = PQerrorMessage(conn);
  while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
  // A connection gone is the store being unreachable; a full disk on the server says so.
  const bool gone = PQstatus(conn) != CONNECTION_OK;
  const bool full = message.find("No space left") != std::string::npos ||
                    message.find("could not extend file") != std::string::npos;
  return {gone ? ErrorCode::kUnavailable : full ? ErrorCode::kResourceExhausted : ErrorCode::kInternal,
          what + ": " + message};
}

// Runs `sql` with text parameters (a nullopt one as NULL; `binary` ones as bytea).
PgResult run(PGconn* conn, const char* sql, const std::vector<const std::string*>& params,
             const std::vector<int>& binary = {}) {
  std::vector<const char*> values;
  std::vector<int> lengths, formats;
  for (size_t i = 0; i < params.size(); ++i) {
    values.push_back(params[i] ? params[i]->data() : nullptr);
    lengths.push_back(params[i] ? static_cast<int>(params[i]->size()) : 0);
    formats.push_back(i < binary.size() ? binary[i] : 0);
  }
  // Binary results: bytea values come back as their bytes, text as text.
  return PgResult(PQexecParams(conn, sql, static_cast<int>(params.size()), nullptr, values.data(), lengths.data(),
                               formats.data(), 1));
}

std::string column(PGresult* result, int row, int col) {
  return std::string(PQgetvalue(result, row, col), static_cast<size_t>(PQgetlength(result, row, col)));
}

Status exec(PGconn* conn, const char* sql) {
  PgResult result(PQexec(conn, sql));
  if (!result.ok()) return pg_error(conn, sql);
  return {};
}

constexpr const char* kUpsert =
    "INSERT INTO records(tbl, key, value) VALUES($1, $2, $3) "
    "ON CONFLICT (tbl, key) DO UPDATE SET value = excluded.value";
constexpr const char* kDelete = "DELETE FROM records WHERE tbl = $1 AND key = $2";
constexpr const char* kAcquire =
    "INSERT INTO lease(name, holder, epoch, expires_at) "
    "VALUES('head', $1, 1, now() + $2::bigint * interval '1 millisecond') "
    "ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, epoch = lease.epoch + 1, "
    "expires_at = excluded.expires_at WHERE lease.expires_at <= now() RETURNING epoch::text";
constexpr const char* kRenew =
    "UPDATE lease SET expires_at = now() + $3::bigint * interval '1 millisecond' "
    "WHERE name = 'head' AND holder = $1 AND epoch = $2::bigint AND expires_at > now() RETURNING epoch::text";
constexpr const char* kHolds =
    "SELECT epoch FROM lease WHERE name = 'head' AND holder = $1 AND epoch = $2::bigint AND expires_at > now() "
    "FOR SHARE";

}  // namespace

struct PostgresStore::Impl {
  PGconn* writer_conn = nullptr;  // the writer thread's only (after open)
  PGconn* reader_conn = nullptr;  // guarded by reader_mu
  std::mutex reader_mu;
  std::mutex fence_mu;  // guards the fence
  std::optional<std::pair<std::string, int64_t>> fence;  // (holder, epoch) every write must hold
  std::unique_ptr<GroupWriter> writer;

  ~Impl() {
    writer.reset();  // drains the queue first
    if (reader_conn) PQfinish(reader_conn);
    if (writer_conn) PQfinish(writer_conn);
  }

  Status apply(const std::vector<Mutation>& batch) {
    for (const auto& m : batch) {
      PgResult result = m.value ? run(writer_conn, kUpsert, {&m.table, &m.key, &*m.value}, {0, 0, 1})
                                : run(writer_conn, kDelete, {&m.table, &m.key});
      if (!result.ok()) return pg_error(writer_conn, "writing " + m.table + "/" + m.key);
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
    PgResult held = run(writer_conn, kHolds, {&mine->first, &epoch});
    if (!held.ok()) return pg_error(writer_conn, "checking the lease");
    if (PQntuples(held.get()) == 0) {
      return Error{ErrorCode::kUnavailable, "this head no longer leads the store (its lease, epoch " + epoch +
                                                ", ran out or another head took it over); nothing was written"};
    }
    return {};
  }

  // GroupWriter's commit: every batch in one transaction.
  Status commit(const std::vector<const std::vector<Mutation>*>& batches) {
    if (PQstatus(writer_conn) != CONNECTION_OK) PQreset(writer_conn);  // a server back after a restart
    if (Status s = exec(writer_conn, "BEGIN"); !s) return s;
    if (Status s = check_fence(); !s) {
      (void)exec(writer_conn, "ROLLBACK");
      return s;
    }
    for (const auto* batch : batches) {
      if (Status s = apply(*batch); !s) {
        (void)exec(writer_conn, "ROLLBACK");
        return s;
      }
    }
    if (Status s = exec(writer_conn, "COMMIT"); !s) {
      (void)exec(writer_conn, "ROLLBACK");
      return s;
    }
    return {};
  }
};

PostgresStore::PostgresStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PostgresStore::~PostgresStore() = default;

Result<std::unique_ptr<PostgresStore>> PostgresStore::open(const std::string& conninfo) {
  auto impl = std::make_unique<Impl>();
  for (PGconn** conn : {&impl->writer_conn, &impl->reader_conn}) {
    *conn = PQconnectdb(conninfo.c_str());
    if (PQstatus(*conn) != CONNECTION_OK) {
      return Error{ErrorCode::kUnavailable, "cannot reach the store: " + pg_error(*conn, "connecting").message};
    }
    // The server's notices ("relation already exists, skipping") are not for the head's log.
    PQsetNoticeProcessor(*conn, [](void*, const char*) {}, nullptr);
  }
  if (Status s = exec(impl->writer_conn,
                      "CREATE TABLE IF NOT EXISTS records(tbl TEXT COLLATE \"C\" NOT NULL, "
                      "key TEXT COLLATE \"C\" NOT NULL, value BYTEA NOT NULL, PRIMARY KEY(tbl, key))");
      !s) {
    return Error{ErrorCode::kInternal, "preparing the store: " + s.error().message};
  }
  if (Status s = exec(impl->writer_conn,
                      "CREATE TABLE IF NOT EXISTS lease(name TEXT PRIMARY KEY, holder TEXT NOT NULL, "
                      "epoch BIGINT NOT NULL, expires_at TIMESTAMPTZ NOT NULL)");
      !s) {
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
  PgResult result = run(impl_->reader_conn, "SELECT key, value FROM records WHERE tbl = $1 ORDER BY key", {&table});
  if (!result.ok()) return pg_error(impl_->reader_conn, "scanning " + table);
  std::vector<Record> out;
  const int rows = PQntuples(result.get());
  out.reserve(static_cast<size_t>(rows));
  for (int i = 0; i < rows; ++i) out.emplace_back(column(result.get(), i, 0), column(result.get(), i, 1));
  return out;
}

Result<std::optional<std::string>> PostgresStore::get(const std::string& table, const std::string& key) {
  std::lock_guard lock(impl_->reader_mu);
  PgResult result = run(impl_->reader_conn, "SELECT value FROM records WHERE tbl = $1 AND key = $2", {&table, &key});
  if (!result.ok()) return pg_error(impl_->reader_conn, "reading " + table + "/" + key);
  if (PQntuples(result.get()) == 0) return std::optional<std::string>();
  return std::optional<std::string>(column(result.get(), 0, 0));
}

void PostgresStore::flush() { impl_->writer->flush(); }

uint64_t PostgresStore::commits() const { return impl_->writer->commits(); }

Result<std::optional<int64_t>> PostgresStore::acquire_lease(const std::string& holder, int64_t ttl_ms) {
  std::lock_guard lock(impl_->reader_mu);
  const std::string ttl = std::to_string(ttl_ms);
  PgResult result = run(impl_->reader_conn, kAcquire, {&holder, &ttl});
  if (!result.ok()) return pg_error(impl_->reader_conn, "taking the lease");
  if (PQntuples(result.get()) == 0) return std::optional<int64_t>();
  return std::optional<int64_t>(std::stoll(column(result.get(), 0, 0)));
}

Result<bool> PostgresStore::renew_lease(const std::string& holder, int64_t epoch, int64_t ttl_ms) {
  std::lock_guard lock(impl_->reader_mu);
  const std::string epoch_text = std::to_string(epoch), ttl = std::to_string(ttl_ms);
  PgResult result = run(impl_->reader_conn, kRenew, {&holder, &epoch_text, &ttl});
  if (!result.ok()) return pg_error(impl_->reader_conn, "renewing the lease");
  return PQntuples(result.get()) > 0;
}

void PostgresStore::fence(const std::string& holder, int64_t epoch) {
  std::lock_guard lock(impl_->fence_mu);
  impl_->fence = std::make_pair(holder, epoch);
}

}  // namespace ag::store
