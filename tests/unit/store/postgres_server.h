// A PostgreSQL server for the tests, started once per test binary on first use and
// stopped at its exit: initdb and pg_ctl from Debian's postgresql package in a temp dir,
// listening only on a Unix socket there (no TCP), fsync off (the tests check the
// store's logic, not the server's disk). As root the server runs as `nobody` (PostgreSQL
// refuses root). Where no server can be started, ready() is false and why() says why:
// the tests that need one skip, saying so.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "head/store/libpq.h"

namespace ag::store::testing {

class PostgresServer {
 public:
  static PostgresServer& get() {
    static PostgresServer server;
    return server;
  }
  bool ready() const { return ready_; }
  const std::string& why() const { return why_; }

  // A fresh, empty database; its libpq connection string. "" when it cannot be made.
  std::string new_database() {
    if (!ready_) return "";
    const std::string name = "t" + std::to_string(next_db_++);
    return execute(conninfo("postgres"), "CREATE DATABASE " + name) ? conninfo(name) : "";
  }
  // Runs `sql` on the database `conninfo` names; true when it succeeded.
  static bool execute(const std::string& conninfo, const std::string& sql) {
    auto loaded = libpq();
    if (!loaded.ok()) return false;
    const LibPq& pq = *loaded.value();
    const char* keys[] = {"dbname", nullptr};
    const char* values[] = {conninfo.c_str(), nullptr};
    PGconn* conn = pq.PQconnectdbParams(keys, values, 1);
    bool ok = pq.PQstatus(conn) == CONNECTION_OK;
    if (ok) {
      PGresult* result = pq.PQexec(conn, sql.c_str());
      ok = pq.PQresultStatus(result) == PGRES_COMMAND_OK || pq.PQresultStatus(result) == PGRES_TUPLES_OK;
      pq.PQclear(result);
    }
    pq.PQfinish(conn);
    return ok;
  }
  std::string conninfo(const std::string& database) const {
    return "host=" + dir_ + " port=" + std::to_string(kPort) + " user=ag dbname=" + database;
  }

 private:
  static constexpr int kPort = 5432;  // names the socket only: no TCP

  PostgresServer() {
    if (auto loaded = libpq(); !loaded.ok()) {
      why_ = loaded.error().message;
      return;
    }
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/usr/lib/postgresql", ec)) {
      if (std::filesystem::exists(entry.path() / "bin/initdb")) bin_ = (entry.path() / "bin").string();
    }
    if (bin_.empty()) {
      why_ = "no PostgreSQL server here (/usr/lib/postgresql/*/bin/initdb; scripts/install-deps.sh installs it)";
      return;
    }
    // A folder of this process's own (mkdir fails on one that exists).
    const std::string dir =
        (std::filesystem::temp_directory_path() / ("ag-pg-" + std::to_string(::getpid()))).string();
    if (::mkdir(dir.c_str(), 0700) != 0) {
      why_ = "cannot make " + dir + " for PostgreSQL";
      return;
    }
    dir_ = dir;
    std::string as;  // PostgreSQL will not run as root
    if (::geteuid() == 0) {
      if (::chown(dir_.c_str(), 65534, 65534) != 0) {
        why_ = "cannot give " + dir_ + " to nobody";
        return;
      }
      as = "runuser -u nobody -- ";
    }
    const std::string init = as + bin_ + "/initdb -D " + dir_ + "/data -U ag -A trust --no-sync --no-locale -E UTF8 >" +
                             dir_ + "/initdb.log 2>&1";
    const std::string start = as + bin_ + "/pg_ctl -D " + dir_ + "/data -l " + dir_ + "/server.log -w -t 30 -o \"-k " +
                              dir_ + " -p " + std::to_string(kPort) + " -c listen_addresses='' -c fsync=off\" start >" +
                              dir_ + "/pg_ctl.log 2>&1";
    if (std::system(init.c_str()) != 0) {
      why_ = "initdb failed (see " + dir_ + "/initdb.log)";
      return;
    }
    if (std::system(start.c_str()) != 0) {
      why_ = "the PostgreSQL server did not start (see " + dir_ + "/server.log)";
      return;
    }
    stop_ = as + bin_ + "/pg_ctl -D " + dir_ + "/data -m immediate stop >/dev/null 2>&1";
    ready_ = true;
  }
  ~PostgresServer() {
    if (!stop_.empty()) (void)std::system(stop_.c_str());
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }

  std::string bin_;
  std::string dir_;
  std::string stop_;
  bool ready_ = false;
  std::string why_;
  int next_db_ = 1;
};

}  // namespace ag::store::testing
