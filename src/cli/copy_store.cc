// ag admin copy-store: moves a stopped lone head's state into the PostgreSQL store and
// the shared dir that standby heads use (README, High availability): every record of
// its database (jobs, events, users, tokens, queues, quotas, usage, audit, node
// credentials), its cluster CA and tokens, its task logs and working_dir packages.
#include <dirent.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include "cli/commands.h"
#include "cli/store_url.h"
#include "common/ids.h"
#include "head/store/copy_records.h"
#include "head/store/postgres_store.h"
#include "head/store/sqlite_store.h"
#include "net/auth.h"

namespace ag::cli {
namespace {

namespace fs = std::filesystem;

// The pid of a process that holds `db` open (a head running on it), or 0.
int process_with_open(const std::string& db) {
  std::error_code ec;
  for (const auto& proc : fs::directory_iterator("/proc", fs::directory_options::skip_permission_denied, ec)) {
    const std::string name = proc.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::error_code fd_ec;
    for (const auto& fd : fs::directory_iterator(proc.path() / "fd", fd_ec)) {
      std::error_code link_ec;
      if (fs::read_symlink(fd.path(), link_ec).string() == db) return std::stoi(name);
    }
  }
  return 0;
}

std::string read_all(const fs::path& path) {
  std::ifstream in(path);
  return {(std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()};
}

}  // namespace

int copy_store(const CopyStoreOptions& options) {
  const std::string from = fs::absolute(options.from).lexically_normal().string();
  const std::string db = from + "/head.db";
  std::error_code ec;
  if (!fs::is_regular_file(db, ec)) {
    std::cerr << "error: --from " << options.from << " holds no head database (head.db): give the --data-dir of the "
              << "head to move\n";
    return 2;
  }
  if (std::string problem = store_url_problem(options.to); !problem.empty()) {
    std::cerr << "error: " << problem << "\n";
    return 2;
  }
  if (int pid = process_with_open(db)) {
    std::cerr << "error: a head is running on " << from << " (pid " << pid << "): stop it first (ag stop), so that "
              << "nothing changes while it is copied\n";
    return 1;
  }
  const fs::path shared = fs::absolute(options.shared_dir).lexically_normal();
  // The shared dir takes this cluster's CA: one of another cluster is never replaced.
  const std::string from_ca = read_all(fs::path(from) / "tls/ca.crt");
  const std::string shared_ca = read_all(shared / "tls/ca.crt");
  if (!shared_ca.empty() && shared_ca != from_ca && !options.force) {
    std::cerr << "error: --shared-dir " << shared.string() << " holds another cluster's CA; give an empty directory, or "
              << "--force to replace it\n";
    return 1;
  }
  std::string password;
  if (!options.password_file.empty()) {
    auto read = net::read_private_token_file(options.password_file);
    if (!read.ok()) {
      std::cerr << "error: --store-password-file: " << read.error().message << "\n";
      return 2;
    }
    password = read.value();
  }
  auto source = store::SqliteStore::open(db);
  if (!source.ok()) {
    std::cerr << "error: --from: " << source.error().message << "\n";
    return 1;
  }
  auto target = store::PostgresStore::open({options.to, password});
  if (!target.ok()) {
    std::cerr << "error: --to: " << target.error().message << "\n";
    return 1;
  }
  // Never under a running cluster's feet, --force or not.
  auto lease = target.value()->read_lease();
  if (lease.ok() && lease->live) {
    std::cerr << "error: a head leads the store at " << options.to << " now (" << lease->holder << ", epoch "
              << lease->epoch << "): stop the heads that use it first\n";
    return 1;
  }
  auto held = target.value()->tables();
  if (!held.ok()) {
    std::cerr << "error: --to: " << held.error().message << "\n";
    return 1;
  }
  if (!held->empty() && !options.force) {
    std::cerr << "error: the store at " << options.to << " already holds a cluster's records (tables:";
    for (const auto& table : held.value()) std::cerr << " " << table;
    std::cerr << "); give --force to replace them (what it holds now is deleted)\n";
    return 1;
  }
  fs::create_directories(shared, ec);
  if (!ec) fs::permissions(shared, fs::perms::owner_all, ec);
  if (ec) {
    std::cerr << "error: --shared-dir " << shared.string() << ": " << ec.message() << "\n";
    return 1;
  }
  auto cluster_id = net::load_or_create_token((shared / "cluster-id").string(), "agc_");
  if (!cluster_id.ok()) {
    std::cerr << "error: " << cluster_id.error().message << "\n";
    return 1;
  }
  auto copied = store::copy_records(*source.value(), *target.value(), options.force);
  if (!copied.ok()) {
    std::cerr << "error: copying the records: " << copied.error().message << "\n";
    return 1;
  }
  // Then the files: the records are in, and the store names this cluster only once its
  // CA, tokens, logs and packages are in the shared dir too (below).
  for (const char* dir : {"tls", "logs", "packages"}) {
    if (ec) break;
    if (!fs::exists(fs::path(from) / dir)) continue;
    fs::copy(fs::path(from) / dir, shared / dir,
             fs::copy_options::recursive | fs::copy_options::overwrite_existing, ec);
  }
  for (const char* file : {"token", "join-token"}) {
    if (ec) break;
    if (fs::exists(fs::path(from) / file)) {
      fs::copy_file(fs::path(from) / file, shared / file, fs::copy_options::overwrite_existing, ec);
    }
  }
  if (ec) {
    std::cerr << "error: copying files into " << shared.string() << ": " << ec.message() << "\n";
    return 1;
  }
  Status recorded;
  target.value()->write({{store::kMetaTable, "cluster_id", cluster_id.value()}}, [&](Status s) { recorded = s; });
  target.value()->flush();
  if (!recorded) {
    std::cerr << "error: recording the cluster in the store: " << recorded.error().message << "\n";
    return 1;
  }
  std::cout << "Copied the head in " << from << " to " << options.to << ":\n";
  for (const auto& [table, n] : copied.value()) std::cout << "  " << table << ": " << n << " record(s)\n";
  std::cout << "and its cluster CA, tokens, task logs and packages to " << shared.string() << ".\n"
            << "Start each head with: ag start-head --store " << options.to
            << (options.password_file.empty() ? "" : " --store-password-file " + options.password_file)
            << " --shared-dir " << shared.string() << " --node-ip-address ADDRESS\n";
  return 0;
}

}  // namespace ag::cli
