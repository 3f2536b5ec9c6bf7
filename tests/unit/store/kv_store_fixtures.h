// Fixture helpers for KvStore tests: backends the contract suite runs against, each
// opened fresh per test (why_not: why a backend cannot be had here, for a skip), and a
// way to wait for one write's outcome.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "head/store/kv_store.h"
#include "head/store/memory_store.h"
#include "head/store/postgres_store.h"
#include "head/store/sqlite_store.h"
#include "store/postgres_server.h"

namespace ag::store::testing {

// A directory under the system temp dir, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "kv_store_test_XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed for " << pattern;
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// The product backend: an SQLite file in a fresh temp dir.
struct SqliteBackend {
  TempDir dir;
  std::unique_ptr<SqliteStore> store;
  std::string why_not;

  SqliteBackend() {
    auto opened = SqliteStore::open(dir.file("head.db"));
    if (!opened.ok()) {
      ADD_FAILURE() << "could not open store: " << opened.error().message;
      return;
    }
    store = std::move(opened).value();
  }
  KvStore& get() { return *store; }
};

// The unit-test backend.
struct MemoryBackend {
  MemoryStore store;
  std::string why_not;
  KvStore& get() { return store; }
};

// The shared store: a fresh database on the tests' PostgreSQL server (postgres_server.h).
struct PostgresBackend {
  std::unique_ptr<PostgresStore> store;
  std::string why_not;  // set when there is no store: the test skips, saying this

  PostgresBackend() {
    PostgresServer& server = PostgresServer::get();
    if (!server.ready()) {
      why_not = server.why();
      return;
    }
    auto opened = PostgresStore::open({server.new_database()});
    if (!opened.ok()) {
      ADD_FAILURE() << "could not open store: " << opened.error().message;
      why_not = opened.error().message;
      return;
    }
    store = std::move(opened).value();
  }
  KvStore& get() { return *store; }
};

inline Mutation put(std::string table, std::string key, std::string value) {
  return {std::move(table), std::move(key), std::move(value)};
}

inline Mutation erase(std::string table, std::string key) { return {std::move(table), std::move(key), std::nullopt}; }

// Writes `batch` and waits for its `done`; returns the status it reported.
inline Status write_and_wait(KvStore& store, std::vector<Mutation> batch) {
  auto outcome = std::make_shared<std::promise<Status>>();
  std::future<Status> result = outcome->get_future();
  store.write(std::move(batch), [outcome](Status status) { outcome->set_value(std::move(status)); });
  return result.get();
}

// The value under table/key, or nullopt; a read error fails the test.
inline std::optional<std::string> get_value(KvStore& store, const std::string& table, const std::string& key) {
  auto result = store.get(table, key);
  if (!result.ok()) {
    ADD_FAILURE() << "get " << table << "/" << key << ": " << result.error().message;
    return std::nullopt;
  }
  return *result;
}

// Every record of a table; a read error fails the test.
inline std::vector<Record> scan_table(KvStore& store, const std::string& table) {
  auto result = store.scan(table);
  if (!result.ok()) {
    ADD_FAILURE() << "scan " << table << ": " << result.error().message;
    return {};
  }
  return *result;
}

}  // namespace ag::store::testing
