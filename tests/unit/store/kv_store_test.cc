// The KvStore contract, run against every backend (SqliteStore, MemoryStore and
// PostgresStore on a server the test starts: postgres_server.h), plus
// the behaviour only one backend has: SQLite's durability and group commit, and the
// memory store's injected write failures.
#include "head/store/kv_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "head/store/copy_records.h"
#include "store/kv_store_fixtures.h"

namespace ag::store {
namespace {

using namespace ag::store::testing;  // NOLINT: fixture helpers keep tests short.
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::Pair;

// --- The contract every backend keeps --------------------------------------------

template <typename Backend>
class KvStoreContractTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!backend_.why_not.empty()) GTEST_SKIP() << backend_.why_not;
  }
  KvStore& store() { return backend_.get(); }

 private:
  Backend backend_;
};

using Backends = ::testing::Types<SqliteBackend, MemoryBackend, PostgresBackend>;

class BackendNames {
 public:
  template <typename T>
  static std::string GetName(int) {
    if (std::is_same_v<T, SqliteBackend>) return "Sqlite";
    return std::is_same_v<T, PostgresBackend> ? "Postgres" : "Memory";
  }
};

TYPED_TEST_SUITE(KvStoreContractTest, Backends, BackendNames);

TYPED_TEST(KvStoreContractTest, WrittenRecordCanBeReadBack) {
  const Status status = write_and_wait(this->store(), {put(kJobsTable, "job_1", "{\"a\":1}")});

  ASSERT_TRUE(status.ok()) << status.error().message;
  EXPECT_EQ(get_value(this->store(), kJobsTable, "job_1"), "{\"a\":1}");
}

TYPED_TEST(KvStoreContractTest, MissingKeyAndEmptyTableReadAsAbsent) {
  EXPECT_EQ(get_value(this->store(), kJobsTable, "nope"), std::nullopt);
  EXPECT_THAT(scan_table(this->store(), kJobsTable), IsEmpty());
}

TYPED_TEST(KvStoreContractTest, ScanReturnsRecordsSortedByKey) {
  ASSERT_TRUE(write_and_wait(this->store(), {put(kJobsTable, "job_c", "3"), put(kJobsTable, "job_a", "1"),
                                             put(kJobsTable, "job_b", "2")})
                  .ok());

  EXPECT_THAT(scan_table(this->store(), kJobsTable),
              ElementsAre(Pair("job_a", "1"), Pair("job_b", "2"), Pair("job_c", "3")));
}

TYPED_TEST(KvStoreContractTest, TablesAreIsolated) {
  ASSERT_TRUE(write_and_wait(this->store(), {put(kJobsTable, "k", "job"), put(kEventsTable, "k", "event"),
                                             put(kEventsTable, "k2", "event2")})
                  .ok());

  EXPECT_THAT(scan_table(this->store(), kJobsTable), ElementsAre(Pair("k", "job")));
  EXPECT_THAT(scan_table(this->store(), kEventsTable), ElementsAre(Pair("k", "event"), Pair("k2", "event2")));
  EXPECT_THAT(scan_table(this->store(), kMetaTable), IsEmpty());
  EXPECT_EQ(get_value(this->store(), kMetaTable, "k"), std::nullopt);
}

TYPED_TEST(KvStoreContractTest, OverwriteReplacesTheValue) {
  ASSERT_TRUE(write_and_wait(this->store(), {put(kJobsTable, "job_1", "old")}).ok());

  ASSERT_TRUE(write_and_wait(this->store(), {put(kJobsTable, "job_1", "new")}).ok());

  EXPECT_EQ(get_value(this->store(), kJobsTable, "job_1"), "new");
  EXPECT_THAT(scan_table(this->store(), kJobsTable), ElementsAre(Pair("job_1", "new")));
}

TYPED_TEST(KvStoreContractTest, LaterMutationInOneBatchWins) {
  ASSERT_TRUE(write_and_wait(this->store(), {put(kJobsTable, "k", "first"), put(kJobsTable, "k", "second")}).ok());

  EXPECT_EQ(get_value(this->store(), kJobsTable, "k"), "second");
}

TYPED_TEST(KvStoreContractTest, NulloptValueDeletesTheKey) {
  ASSERT_TRUE(write_and_wait(this->store(), {put(kJobsTable, "a", "1"), put(kJobsTable, "b", "2")}).ok());

  const Status status = write_and_wait(this->store(), {erase(kJobsTable, "a")});

  ASSERT_TRUE(status.ok());
  EXPECT_EQ(get_value(this->store(), kJobsTable, "a"), std::nullopt);
  EXPECT_THAT(scan_table(this->store(), kJobsTable), ElementsAre(Pair("b", "2")));
}

TYPED_TEST(KvStoreContractTest, DeletingAnAbsentKeySucceeds) {
  const Status status = write_and_wait(this->store(), {erase(kJobsTable, "never-written")});

  EXPECT_TRUE(status.ok());
  EXPECT_THAT(scan_table(this->store(), kJobsTable), IsEmpty());
}

TYPED_TEST(KvStoreContractTest, BinaryValuesRoundTrip) {
  const std::string value("a\0b\xff\n", 5);

  ASSERT_TRUE(write_and_wait(this->store(), {put(kEventsTable, "e", value)}).ok());

  EXPECT_EQ(get_value(this->store(), kEventsTable, "e"), value);
}

TYPED_TEST(KvStoreContractTest, WholeBatchIsVisibleWhenDoneRuns) {
  KvStore& store = this->store();
  std::vector<Record> jobs_seen_in_done;
  std::vector<Record> events_seen_in_done;
  std::promise<Status> outcome;

  store.write({put(kJobsTable, "job_1", "j"), put(kEventsTable, "job_1/0", "e0"), put(kEventsTable, "job_1/1", "e1")},
              [&](Status status) {
                jobs_seen_in_done = scan_table(store, kJobsTable);
                events_seen_in_done = scan_table(store, kEventsTable);
                outcome.set_value(status);
              });

  ASSERT_TRUE(outcome.get_future().get().ok());
  EXPECT_THAT(jobs_seen_in_done, ElementsAre(Pair("job_1", "j")));
  EXPECT_THAT(events_seen_in_done, ElementsAre(Pair("job_1/0", "e0"), Pair("job_1/1", "e1")));
}

TYPED_TEST(KvStoreContractTest, TablesListsTheTablesThatHoldRecordsSorted) {
  EXPECT_TRUE(this->store().tables().value().empty());
  ASSERT_TRUE(write_and_wait(this->store(), {put(kMetaTable, "m", "1"), put(kJobsTable, "j", "2"),
                                             put(kEventsTable, "e", "3")})
                  .ok());
  ASSERT_TRUE(write_and_wait(this->store(), {erase(kEventsTable, "e")}).ok());
  EXPECT_EQ(this->store().tables().value(), (std::vector<std::string>{kJobsTable, kMetaTable}));
}

TYPED_TEST(KvStoreContractTest, FlushWaitsForEveryQueuedWrite) {
  constexpr int kBatches = 300;
  std::atomic<int> done_calls{0};
  for (int i = 0; i < kBatches; ++i) {
    this->store().write({put(kJobsTable, "job_" + std::to_string(1000 + i), std::to_string(i))}, [&](Status status) {
      if (status.ok()) done_calls.fetch_add(1);
    });
  }

  this->store().flush();

  EXPECT_EQ(done_calls.load(), kBatches);
  const std::vector<Record> records = scan_table(this->store(), kJobsTable);
  ASSERT_EQ(records.size(), static_cast<size_t>(kBatches));
  EXPECT_EQ(records.front(), Record("job_1000", "0"));
  EXPECT_EQ(records.back(), Record("job_1299", "299"));
}

TYPED_TEST(KvStoreContractTest, ConcurrentWritersAllLandAndEachDoneRunsOnce) {
  constexpr int kThreads = 4;
  constexpr int kBatchesPerThread = 500;
  std::vector<std::atomic<int>> done_calls(kThreads * kBatchesPerThread);
  std::atomic<int> failures{0};
  KvStore& store = this->store();

  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; i < kBatchesPerThread; ++i) {
        const int n = t * kBatchesPerThread + i;
        char key[32];
        std::snprintf(key, sizeof key, "t%d-%04d", t, i);
        store.write({put(kJobsTable, key, std::to_string(n))}, [&, n](Status status) {
          if (!status.ok()) failures.fetch_add(1);
          done_calls[n].fetch_add(1);
        });
      }
    });
  }
  for (auto& w : writers) w.join();
  store.flush();

  EXPECT_EQ(failures.load(), 0);
  for (size_t n = 0; n < done_calls.size(); ++n) {
    ASSERT_EQ(done_calls[n].load(), 1) << "batch " << n;
  }
  const std::vector<Record> records = scan_table(store, kJobsTable);
  ASSERT_EQ(records.size(), done_calls.size());
  EXPECT_EQ(records.front(), Record("t0-0000", "0"));
  EXPECT_EQ(records.back(), Record("t3-0499", "1999"));
}

// --- SQLite only -----------------------------------------------------------------

TEST(SqliteStoreTest, DataSurvivesClosingAndReopeningTheFile) {
  TempDir dir;
  const std::string path = dir.file("head.db");
  {
    auto store = SqliteStore::open(path);
    ASSERT_TRUE(store.ok()) << store.error().message;
    ASSERT_TRUE(write_and_wait(**store, {put(kJobsTable, "job_1", "v1"), put(kJobsTable, "job_2", "v2"),
                                         put(kMetaTable, "schema", "1")})
                    .ok());
    ASSERT_TRUE(write_and_wait(**store, {erase(kJobsTable, "job_2"), put(kJobsTable, "job_1", "v1b")}).ok());
  }

  auto reopened = SqliteStore::open(path);

  ASSERT_TRUE(reopened.ok()) << reopened.error().message;
  EXPECT_THAT(scan_table(**reopened, kJobsTable), ElementsAre(Pair("job_1", "v1b")));
  EXPECT_EQ(get_value(**reopened, kMetaTable, "schema"), "1");
}

TEST(SqliteStoreTest, ClosingDrainsWritesStillQueued) {
  TempDir dir;
  const std::string path = dir.file("head.db");
  std::atomic<int> done_calls{0};
  {
    auto store = SqliteStore::open(path);
    ASSERT_TRUE(store.ok()) << store.error().message;
    for (int i = 0; i < 50; ++i) {
      (*store)->write({put(kEventsTable, "e" + std::to_string(100 + i), "x")}, [&](Status) { done_calls++; });
    }
  }  // no flush: the destructor must not drop them

  auto reopened = SqliteStore::open(path);

  ASSERT_TRUE(reopened.ok());
  EXPECT_EQ(done_calls.load(), 50);
  EXPECT_EQ(scan_table(**reopened, kEventsTable).size(), 50u);
}

TEST(SqliteStoreTest, GroupCommitUsesFarFewerTransactionsThanBatches) {
  SqliteBackend backend;
  ASSERT_NE(backend.store, nullptr);
  constexpr int kBatches = 2000;
  const uint64_t commits_before = backend.store->commits();

  for (int i = 0; i < kBatches; ++i) {
    backend.store->write({put(kJobsTable, "job_" + std::to_string(10000 + i), "v")}, [](Status) {});
  }
  backend.store->flush();

  const uint64_t commits = backend.store->commits() - commits_before;
  ::testing::Test::RecordProperty("commits", static_cast<int>(commits));
  EXPECT_GE(commits, 1u);
  EXPECT_LT(commits, static_cast<uint64_t>(kBatches / 20)) << commits << " commits for " << kBatches << " batches";
  EXPECT_EQ(scan_table(*backend.store, kJobsTable).size(), static_cast<size_t>(kBatches));
}

// A head's file of the earlier layout (records WITHOUT ROWID) keeps every record and is
// reshaped into a rowid table once, which a head of the earlier version still writes
// and reads with its own statements.
TEST(SqliteStoreTest, AFileOfTheEarlierLayoutKeepsItsRecordsAndStaysUsableByEarlierHeads) {
  TempDir dir;
  const std::string path = dir.file("head.db");
  auto sql = [&](sqlite3* db, const std::string& text) {
    char* err = nullptr;
    const int rc = sqlite3_exec(db, text.c_str(), nullptr, nullptr, &err);
    EXPECT_EQ(rc, SQLITE_OK) << text << ": " << (err ? err : "");
    sqlite3_free(err);
  };
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sql(db, "PRAGMA journal_mode=WAL");
  sql(db,
      "CREATE TABLE records(tbl TEXT NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL, PRIMARY KEY(tbl, key)) "
      "WITHOUT ROWID");
  const std::string long_value(3000, 'x');  // longer than a quarter page, as a job's record is
  sql(db, "INSERT INTO records VALUES('jobs', 'job_b', '" + long_value +
              "'), ('jobs', 'job_a', 'a'), "
              "('meta', 'schema', '1')");
  sqlite3_close(db);

  {
    auto store = SqliteStore::open(path);
    ASSERT_TRUE(store.ok()) << store.error().message;
    EXPECT_THAT(scan_table(**store, kJobsTable), ElementsAre(Pair("job_a", "a"), Pair("job_b", long_value)));
    EXPECT_EQ(get_value(**store, kMetaTable, "schema"), "1");
    ASSERT_TRUE(write_and_wait(**store, {put(kJobsTable, "job_a", "a2"), put(kJobsTable, "job_c", "c")}).ok());
  }

  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT sql FROM sqlite_master WHERE name = 'records'", -1, &stmt, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  const std::string shape = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
  sqlite3_finalize(stmt);
  EXPECT_THAT(shape, Not(HasSubstr("WITHOUT ROWID")));
  EXPECT_THAT(shape, HasSubstr("UNIQUE(tbl, key)"));
  // What a head of the earlier version runs at its start and for every write.
  sql(db,
      "CREATE TABLE IF NOT EXISTS records(tbl TEXT NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL, "
      "PRIMARY KEY(tbl, key)) WITHOUT ROWID");
  sql(db,
      "INSERT INTO records(tbl, key, value) VALUES('jobs', 'job_c', 'c2') "
      "ON CONFLICT(tbl, key) DO UPDATE SET value = excluded.value");
  sqlite3_close(db);

  auto reopened = SqliteStore::open(path);
  ASSERT_TRUE(reopened.ok()) << reopened.error().message;
  EXPECT_THAT(scan_table(**reopened, kJobsTable),
              ElementsAre(Pair("job_a", "a2"), Pair("job_b", long_value), Pair("job_c", "c2")));
}

TEST(SqliteStoreTest, OpeningInAMissingDirectoryFails) {
  TempDir dir;

  auto store = SqliteStore::open(dir.file("no/such/dir/head.db"));

  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.error().code, ErrorCode::kInternal);
  EXPECT_THAT(store.error().message, HasSubstr("no/such/dir/head.db"));
}

TEST(SqliteStoreTest, OpeningAFileThatIsNotADatabaseFails) {
  TempDir dir;
  const std::string path = dir.file("notes.txt");
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    for (int i = 0; i < 100; ++i) std::fputs("this is not an sqlite database\n", f);
    std::fclose(f);
  }

  auto store = SqliteStore::open(path);

  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.error().code, ErrorCode::kInternal);
  EXPECT_THAT(store.error().message, HasSubstr(path));
}

// --- MemoryStore only ------------------------------------------------------------

// --- PostgreSQL: what only a shared, networked store has --------------------------

class PostgresStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!PostgresServer::get().ready()) GTEST_SKIP() << PostgresServer::get().why();
    conninfo_ = PostgresServer::get().new_database();
    ASSERT_FALSE(conninfo_.empty());
  }
  std::string conninfo_;
};

TEST_F(PostgresStoreTest, ASecondStoreOnTheSameDatabaseSeesEveryWriteAndDrainsOnClose) {
  std::atomic<int> done_calls{0};
  {
    auto store = PostgresStore::open({conninfo_});
    ASSERT_TRUE(store.ok()) << store.error().message;
    ASSERT_TRUE(write_and_wait(**store, {put(kJobsTable, "job_1", "v1"), put(kJobsTable, "job_2", "v2")}).ok());
    ASSERT_TRUE(write_and_wait(**store, {erase(kJobsTable, "job_2"), put(kJobsTable, "job_1", "v1b")}).ok());
    for (int i = 0; i < 50; ++i) {
      (*store)->write({put(kEventsTable, "e" + std::to_string(100 + i), "x")}, [&](Status) { done_calls++; });
    }
  }  // no flush: the destructor must not drop them
  auto other = PostgresStore::open({conninfo_});
  ASSERT_TRUE(other.ok()) << other.error().message;
  EXPECT_THAT(scan_table(**other, kJobsTable), ElementsAre(Pair("job_1", "v1b")));
  EXPECT_EQ(done_calls.load(), 50);
  EXPECT_EQ(scan_table(**other, kEventsTable).size(), 50u);
}

TEST_F(PostgresStoreTest, GroupCommitUsesFarFewerTransactionsThanBatches) {
  auto store = PostgresStore::open({conninfo_});
  ASSERT_TRUE(store.ok()) << store.error().message;
  constexpr int kBatches = 2000;
  for (int i = 0; i < kBatches; ++i) {
    (*store)->write({put(kJobsTable, "job_" + std::to_string(10000 + i), "v")}, [](Status) {});
  }
  (*store)->flush();
  EXPECT_LT((*store)->commits(), static_cast<uint64_t>(kBatches / 20));
  EXPECT_EQ(scan_table(**store, kJobsTable).size(), static_cast<size_t>(kBatches));
}

TEST_F(PostgresStoreTest, KeysSortBytewiseAsSqliteSortsThem) {
  auto store = PostgresStore::open({conninfo_});
  ASSERT_TRUE(store.ok()) << store.error().message;
  ASSERT_TRUE(write_and_wait(**store, {put(kJobsTable, "b", "1"), put(kJobsTable, "B", "2"), put(kJobsTable, "a_2", "3"),
                                       put(kJobsTable, "a-1", "4")})
                  .ok());
  std::vector<std::string> keys;
  for (const auto& [key, _] : scan_table(**store, kJobsTable)) keys.push_back(key);
  EXPECT_EQ(keys, (std::vector<std::string>{"B", "a-1", "a_2", "b"}));
}

TEST_F(PostgresStoreTest, OneHeadHoldsTheLeaseARenewalKeepsItAndATakeoverRaisesTheEpoch) {
  auto first = PostgresStore::open({conninfo_});
  auto second = PostgresStore::open({conninfo_});
  ASSERT_TRUE(first.ok() && second.ok());
  auto epoch = (*first)->acquire_lease("head-a", 60'000);
  ASSERT_TRUE(epoch.ok()) << epoch.error().message;
  ASSERT_EQ(epoch.value(), std::optional<int64_t>(1));
  auto refused = (*second)->acquire_lease("head-b", 60'000);
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ(refused.value(), std::nullopt) << "held and not run out";
  EXPECT_TRUE((*first)->renew_lease("head-a", 1, 60'000).value());
  EXPECT_FALSE((*second)->renew_lease("head-b", 1, 60'000).value()) << "not theirs";
  // A short lease runs out on the database's clock; then another head takes it over.
  ASSERT_TRUE((*first)->renew_lease("head-a", 1, 1).value());
  std::optional<int64_t> taken;
  for (int i = 0; i < 500 && !taken; ++i) {
    auto attempt = (*second)->acquire_lease("head-b", 60'000);
    ASSERT_TRUE(attempt.ok());
    taken = attempt.value();
    if (!taken) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(taken, std::optional<int64_t>(2)) << "the epoch rises at a takeover";
  EXPECT_FALSE((*first)->renew_lease("head-a", 1, 60'000).value()) << "the old leader cannot renew";
}

TEST_F(PostgresStoreTest, AWriteOfAHeadWhoseLeaseWasTakenCommitsNothing) {
  auto old_leader = PostgresStore::open({conninfo_});
  auto new_leader = PostgresStore::open({conninfo_});
  ASSERT_TRUE(old_leader.ok() && new_leader.ok());
  ASSERT_EQ((*old_leader)->acquire_lease("head-a", 60'000).value(), std::optional<int64_t>(1));
  (*old_leader)->fence("head-a", 1);
  ASSERT_TRUE(write_and_wait(**old_leader, {put(kJobsTable, "job_1", "by a")}).ok());
  // Its lease runs out and the other head takes over.
  ASSERT_TRUE((*old_leader)->renew_lease("head-a", 1, 1).value());
  std::optional<int64_t> taken;
  for (int i = 0; i < 500 && !taken; ++i) {
    taken = (*new_leader)->acquire_lease("head-b", 60'000).value();
    if (!taken) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(taken, std::optional<int64_t>(2));
  (*new_leader)->fence("head-b", 2);
  // The old leader's writes, alone or in a group, are refused whole.
  const Status late = write_and_wait(**old_leader, {put(kJobsTable, "job_1", "late"), put(kJobsTable, "job_2", "x")});
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.error().code, ErrorCode::kUnavailable);
  EXPECT_THAT(late.error().message, HasSubstr("no longer leads the store"));
  EXPECT_EQ(get_value(**new_leader, kJobsTable, "job_1"), "by a");
  EXPECT_EQ(get_value(**new_leader, kJobsTable, "job_2"), std::nullopt);
  ASSERT_TRUE(write_and_wait(**new_leader, {put(kJobsTable, "job_2", "by b")}).ok());
  EXPECT_EQ(get_value(**old_leader, kJobsTable, "job_2"), "by b");
}

TEST_F(PostgresStoreTest, TheLeaseAsTheDatabaseSeesItNamesItsHolderAndEpoch) {
  auto store = PostgresStore::open({conninfo_});
  ASSERT_TRUE(store.ok()) << store.error().message;
  auto never = (*store)->read_lease();
  ASSERT_TRUE(never.ok()) << never.error().message;
  EXPECT_EQ(never->holder, "");
  EXPECT_FALSE(never->live);
  ASSERT_EQ((*store)->acquire_lease("10.0.0.1:6379", 60'000).value(), std::optional<int64_t>(1));
  auto held = (*store)->read_lease();
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(held->holder, "10.0.0.1:6379");
  EXPECT_EQ(held->epoch, 1);
  EXPECT_TRUE(held->live);
  ASSERT_TRUE((*store)->renew_lease("10.0.0.1:6379", 1, 1).value());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE((*store)->read_lease()->live) << "ran out on the database's clock";
}

TEST_F(PostgresStoreTest, ADatabaseOfAnotherLayoutVersionIsRefusedAndLeftAsItWas) {
  {
    auto store = PostgresStore::open({conninfo_});
    ASSERT_TRUE(store.ok()) << store.error().message;
    ASSERT_TRUE(write_and_wait(**store, {put(kJobsTable, "job_1", "v")}).ok());
  }
  ASSERT_TRUE(PostgresServer::get().execute(conninfo_, "UPDATE ag_schema SET version = 99"));
  auto refused = PostgresStore::open({conninfo_});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kConflict);
  EXPECT_THAT(refused.error().message, HasSubstr("layout version 99"));
  ASSERT_TRUE(PostgresServer::get().execute(conninfo_, "UPDATE ag_schema SET version = 1"));
  auto again = PostgresStore::open({conninfo_});
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(get_value(**again, kJobsTable, "job_1"), "v");
}

TEST_F(PostgresStoreTest, TablesOfAnotherProgramInTheDatabaseAreLeftAlone) {
  ASSERT_TRUE(PostgresServer::get().execute(conninfo_, "CREATE TABLE records(id INT); INSERT INTO records VALUES (7)"));
  auto store = PostgresStore::open({conninfo_});
  ASSERT_TRUE(store.ok()) << store.error().message;
  ASSERT_TRUE(write_and_wait(**store, {put(kJobsTable, "job_1", "v")}).ok());
  EXPECT_TRUE(PostgresServer::get().execute(conninfo_, "SELECT 1 FROM records WHERE id = 7"));
}

TEST_F(PostgresStoreTest, CopyingALoneHeadsRecordsBringsEveryTableAndReplaceDropsWhatWasThere) {
  const std::string path = ::testing::TempDir() + "copy-" + std::to_string(::getpid()) + ".db";
  std::remove(path.c_str());
  auto sqlite = SqliteStore::open(path);
  ASSERT_TRUE(sqlite.ok());
  std::vector<Mutation> jobs;
  for (int i = 0; i < 1234; ++i) jobs.push_back(put(kJobsTable, "job_" + std::to_string(10000 + i), "v"));
  ASSERT_TRUE(write_and_wait(**sqlite, jobs).ok());
  ASSERT_TRUE(write_and_wait(**sqlite, {put(kMetaTable, "quotas", "{}"), put("users", "alice", "{}")}).ok());
  auto pg = PostgresStore::open({conninfo_});
  ASSERT_TRUE(pg.ok()) << pg.error().message;
  ASSERT_TRUE(write_and_wait(**pg, {put(kJobsTable, "job_stale", "old"), put("tokens", "t", "x")}).ok());

  auto kept = copy_records(**sqlite, **pg, false);
  ASSERT_TRUE(kept.ok()) << kept.error().message;
  EXPECT_EQ(kept.value(), (std::map<std::string, size_t>{{kJobsTable, 1234}, {kMetaTable, 1}, {"users", 1}}));
  EXPECT_EQ(get_value(**pg, kJobsTable, "job_stale"), "old") << "kept without replace";

  auto replaced = copy_records(**sqlite, **pg, true);
  ASSERT_TRUE(replaced.ok());
  EXPECT_EQ(get_value(**pg, kJobsTable, "job_stale"), std::nullopt);
  EXPECT_EQ(scan_table(**pg, kJobsTable).size(), 1234u);
  EXPECT_EQ((*pg)->tables().value(), (std::vector<std::string>{kJobsTable, kMetaTable, "users"}));
  sqlite.value().reset();  // closed first, or its -wal and -shm stay behind
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((path + suffix).c_str());
}

TEST(PostgresStoreOpenTest, AStoreThatCannotBeReachedSaysSo) {
  auto store = PostgresStore::open({"host=/nonexistent-dir port=1 user=ag dbname=ag", "", 2});
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.error().code, ErrorCode::kUnavailable);
  EXPECT_THAT(store.error().message, HasSubstr("cannot reach the store"));
  auto garbage = PostgresStore::open({"this is not a connection string"});
  ASSERT_FALSE(garbage.ok());
  EXPECT_THAT(garbage.error().message, HasSubstr("cannot reach the store"));
}

TEST(MemoryStoreTest, FailedWriteReportsResourceExhaustedAndAppliesNothing) {
  MemoryStore store;
  ASSERT_TRUE(write_and_wait(store, {put(kJobsTable, "job_1", "before")}).ok());
  store.fail_next_writes(1);

  const Status failed = write_and_wait(
      store, {put(kJobsTable, "job_1", "after"), put(kJobsTable, "job_2", "new"), erase(kJobsTable, "job_1")});

  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.error().code, ErrorCode::kResourceExhausted);
  EXPECT_THAT(scan_table(store, kJobsTable), ElementsAre(Pair("job_1", "before")));
}

TEST(MemoryStoreTest, WriteAfterTheInjectedFailuresSucceeds) {
  MemoryStore store;
  store.fail_next_writes(1);
  (void)write_and_wait(store, {put(kJobsTable, "a", "1")});

  const Status next = write_and_wait(store, {put(kJobsTable, "b", "2")});

  EXPECT_TRUE(next.ok());
  EXPECT_THAT(scan_table(store, kJobsTable), ElementsAre(Pair("b", "2")));
}

TEST(MemoryStoreTest, FailNextWritesCountsBatches) {
  MemoryStore store;
  store.fail_next_writes(2);

  const Status first = write_and_wait(store, {put(kJobsTable, "a", "1")});
  const Status second = write_and_wait(store, {put(kJobsTable, "b", "2")});
  const Status third = write_and_wait(store, {put(kJobsTable, "c", "3")});

  EXPECT_FALSE(first.ok());
  EXPECT_FALSE(second.ok());
  EXPECT_TRUE(third.ok());
  EXPECT_THAT(scan_table(store, kJobsTable), ElementsAre(Pair("c", "3")));
}

}  // namespace
}  // namespace ag::store
