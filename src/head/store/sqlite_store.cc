#include "head/store/sqlite_store.h"

#include <sqlite3.h>

#include <memory>
#include <mutex>

#include "head/store/group_writer.h"

namespace ag::store {
namespace {

Error sqlite_error(sqlite3* db, int rc, const std::string& what) {
  std::string msg = what + ": " + (db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
  int primary = rc & 0xff;
  if (primary == SQLITE_FULL) {
    return {ErrorCode::kResourceExhausted,
            "the head's disk is full (" + msg + "); nothing was changed: free space on the head's data dir and retry"};
  }
  if (primary == SQLITE_IOERR) {
    return {ErrorCode::kResourceExhausted, msg + " (a disk error on the head: is its disk full?); nothing was changed"};
  }
  return {ErrorCode::kInternal, msg};
}

// A prepared statement that finalizes itself.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) { rc_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr); }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  sqlite3_stmt* get() const { return stmt_; }
  int prepare_rc() const { return rc_; }

 private:
  sqlite3_stmt* stmt_ = nullptr;
  int rc_ = SQLITE_OK;
};

void bind_text(sqlite3_stmt* stmt, int index, const std::string& text) {
  sqlite3_bind_text(stmt, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
}

std::string column_text(sqlite3_stmt* stmt, int index) {
  const void* data = sqlite3_column_blob(stmt, index);
  int size = sqlite3_column_bytes(stmt, index);
  return data ? std::string(static_cast<const char*>(data), static_cast<size_t>(size)) : std::string();
}

}  // namespace

struct SqliteStore::Impl {
  sqlite3* writer_db = nullptr;  // used by the writer thread only (after open)
  sqlite3* reader_db = nullptr;  // guarded by reader_mu
  std::mutex reader_mu;
  std::unique_ptr<Statement> upsert;
  std::unique_ptr<Statement> remove;
  std::unique_ptr<GroupWriter> writer;

  ~Impl() {
    writer.reset();  // drains the queue first
    upsert.reset();
    remove.reset();
    sqlite3_close(reader_db);
    sqlite3_close(writer_db);
  }

  Status exec(const char* sql) {
    char* err = nullptr;
    int rc = sqlite3_exec(writer_db, sql, nullptr, nullptr, &err);
    if (rc != SQLITE_OK) {
      Error e = sqlite_error(writer_db, rc, sql);
      sqlite3_free(err);
      return e;
    }
    return {};
  }

  Status apply(const std::vector<Mutation>& batch) {
    for (const auto& m : batch) {
      sqlite3_stmt* stmt = m.value ? upsert->get() : remove->get();
      sqlite3_reset(stmt);
      bind_text(stmt, 1, m.table);
      bind_text(stmt, 2, m.key);
      if (m.value) {
        sqlite3_bind_blob(stmt, 3, m.value->data(), static_cast<int>(m.value->size()), SQLITE_TRANSIENT);
      }
      int rc = sqlite3_step(stmt);
      if (rc != SQLITE_DONE) return sqlite_error(writer_db, rc, "writing " + m.table + "/" + m.key);
    }
    return {};
  }

  // A records table of the earlier shape (WITHOUT ROWID: a row stored in its key's
  // B-tree, where a job's record, longer than a quarter page, spilled to an overflow page
  // that every change rewrote, with the free-list pages along) becomes a rowid table with
  // the same columns and a unique (tbl, key): rows in place in the table's pages, new
  // ones appended, the key's index small. In one transaction: a crash leaves either
  // shape. Heads of the earlier version use the new shape unchanged (same columns, same
  // upsert conflict target).
  Status reshape_records() {
    Statement shape(writer_db, "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'records'");
    if (shape.prepare_rc() != SQLITE_OK) return sqlite_error(writer_db, shape.prepare_rc(), "reading the schema");
    if (sqlite3_step(shape.get()) != SQLITE_ROW) return {};
    const std::string sql = column_text(shape.get(), 0);
    sqlite3_reset(shape.get());
    if (sql.find("WITHOUT ROWID") == std::string::npos) return {};
    for (const char* step : {"BEGIN IMMEDIATE",
                             "CREATE TABLE records_reshaped(tbl TEXT NOT NULL, key TEXT NOT NULL, "
                             "value BLOB NOT NULL, UNIQUE(tbl, key))",
                             "INSERT INTO records_reshaped(tbl, key, value) SELECT tbl, key, value FROM records "
                             "ORDER BY tbl, key",
                             "DROP TABLE records", "ALTER TABLE records_reshaped RENAME TO records", "COMMIT"}) {
      if (Status s = exec(step); !s) {
        (void)exec("ROLLBACK");
        return s;
      }
    }
    return {};
  }

  // GroupWriter's commit: every batch in one transaction.
  Status commit(const std::vector<const std::vector<Mutation>*>& batches) {
    if (Status s = exec("BEGIN IMMEDIATE"); !s) return s;
    for (const auto* batch : batches) {
      if (Status s = apply(*batch); !s) {
        (void)exec("ROLLBACK");  // the failed write's status is the one to report
        return s;
      }
    }
    if (Status s = exec("COMMIT"); !s) {
      (void)exec("ROLLBACK");
      return s;
    }
    return {};
  }
};

SqliteStore::SqliteStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SqliteStore::~SqliteStore() = default;

Result<std::unique_ptr<SqliteStore>> SqliteStore::open(const std::string& path) {
  auto impl = std::make_unique<Impl>();
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
  int rc = sqlite3_open_v2(path.c_str(), &impl->writer_db, flags, nullptr);
  if (rc != SQLITE_OK) return sqlite_error(impl->writer_db, rc, "opening " + path);
  for (const char* sql : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL", "PRAGMA busy_timeout=5000",
                          "CREATE TABLE IF NOT EXISTS records(tbl TEXT NOT NULL, key TEXT NOT NULL, "
                          "value BLOB NOT NULL, UNIQUE(tbl, key))"}) {
    if (Status s = impl->exec(sql); !s) return Error{s.error().code, "opening " + path + ": " + s.error().message};
  }
  if (Status s = impl->reshape_records(); !s) {
    return Error{s.error().code, "opening " + path + ": " + s.error().message};
  }
  rc = sqlite3_open_v2(path.c_str(), &impl->reader_db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) return sqlite_error(impl->reader_db, rc, "opening " + path + " for reading");
  sqlite3_busy_timeout(impl->reader_db, 5000);
  impl->upsert = std::make_unique<Statement>(impl->writer_db,
                                             "INSERT INTO records(tbl, key, value) VALUES(?1, ?2, ?3) "
                                             "ON CONFLICT(tbl, key) DO UPDATE SET value = excluded.value");
  impl->remove = std::make_unique<Statement>(impl->writer_db, "DELETE FROM records WHERE tbl = ?1 AND key = ?2");
  Impl* raw = impl.get();
  impl->writer = std::make_unique<GroupWriter>([raw](const auto& batches) { return raw->commit(batches); });
  return std::unique_ptr<SqliteStore>(new SqliteStore(std::move(impl)));
}

void SqliteStore::write(std::vector<Mutation> batch, std::function<void(Status)> done) {
  impl_->writer->write(std::move(batch), std::move(done));
}

Result<std::vector<Record>> SqliteStore::scan(const std::string& table) {
  std::lock_guard lock(impl_->reader_mu);
  Statement stmt(impl_->reader_db, "SELECT key, value FROM records WHERE tbl = ?1 ORDER BY key");
  if (stmt.prepare_rc() != SQLITE_OK) return sqlite_error(impl_->reader_db, stmt.prepare_rc(), "scan");
  bind_text(stmt.get(), 1, table);
  std::vector<Record> out;
  int rc;
  while ((rc = sqlite3_step(stmt.get())) == SQLITE_ROW) {
    out.emplace_back(column_text(stmt.get(), 0), column_text(stmt.get(), 1));
  }
  if (rc != SQLITE_DONE) return sqlite_error(impl_->reader_db, rc, "scanning " + table);
  return out;
}

Result<std::vector<std::string>> SqliteStore::tables() {
  std::lock_guard lock(impl_->reader_mu);
  Statement stmt(impl_->reader_db, "SELECT DISTINCT tbl FROM records ORDER BY tbl");
  if (stmt.prepare_rc() != SQLITE_OK) return sqlite_error(impl_->reader_db, stmt.prepare_rc(), "listing tables");
  std::vector<std::string> out;
  int rc;
  while ((rc = sqlite3_step(stmt.get())) == SQLITE_ROW) out.push_back(column_text(stmt.get(), 0));
  if (rc != SQLITE_DONE) return sqlite_error(impl_->reader_db, rc, "listing tables");
  return out;
}

Result<std::optional<std::string>> SqliteStore::get(const std::string& table, const std::string& key) {
  std::lock_guard lock(impl_->reader_mu);
  Statement stmt(impl_->reader_db, "SELECT value FROM records WHERE tbl = ?1 AND key = ?2");
  if (stmt.prepare_rc() != SQLITE_OK) return sqlite_error(impl_->reader_db, stmt.prepare_rc(), "get");
  bind_text(stmt.get(), 1, table);
  bind_text(stmt.get(), 2, key);
  int rc = sqlite3_step(stmt.get());
  if (rc == SQLITE_ROW) return std::optional<std::string>(column_text(stmt.get(), 0));
  if (rc == SQLITE_DONE) return std::optional<std::string>();
  return sqlite_error(impl_->reader_db, rc, "reading " + table + "/" + key);
}

void SqliteStore::flush() { impl_->writer->flush(); }

CommitTimes SqliteStore::commit_times() const { return impl_->writer->commit_times(); }

uint64_t SqliteStore::commits() const { return impl_->writer->commits(); }

}  // namespace ag::store
