#include "head/store/copy_records.h"

#include <memory>
#include <mutex>

namespace ag::store {
namespace {

constexpr size_t kBatch = 500;

// Queues `mutations` in batches and waits for all of them; the first error, if any.
Status write_all(KvStore& to, std::vector<Mutation> mutations) {
  auto first_error = std::make_shared<std::pair<std::mutex, Status>>();
  for (size_t at = 0; at < mutations.size(); at += kBatch) {
    std::vector<Mutation> batch(std::make_move_iterator(mutations.begin() + static_cast<ptrdiff_t>(at)),
                                std::make_move_iterator(mutations.begin() +
                                                        static_cast<ptrdiff_t>(std::min(at + kBatch, mutations.size()))));
    to.write(std::move(batch), [first_error](Status s) {
      std::lock_guard lock(first_error->first);
      if (!s && first_error->second) first_error->second = std::move(s);
    });
  }
  to.flush();
  std::lock_guard lock(first_error->first);
  return first_error->second;
}

}  // namespace

Result<std::map<std::string, size_t>> copy_records(KvStore& from, KvStore& to, bool replace) {
  if (replace) {
    auto old_tables = to.tables();
    if (!old_tables.ok()) return old_tables.error();
    std::vector<Mutation> deletes;
    for (const auto& table : old_tables.value()) {
      auto records = to.scan(table);
      if (!records.ok()) return records.error();
      for (auto& [key, value] : records.value()) deletes.push_back({table, std::move(key), std::nullopt});
    }
    if (Status s = write_all(to, std::move(deletes)); !s) return s.error();
  }
  auto tables = from.tables();
  if (!tables.ok()) return tables.error();
  std::map<std::string, size_t> copied;
  for (const auto& table : tables.value()) {
    auto records = from.scan(table);
    if (!records.ok()) return records.error();
    std::vector<Mutation> puts;
    puts.reserve(records->size());
    for (auto& [key, value] : records.value()) puts.push_back({table, std::move(key), std::move(value)});
    copied[table] = puts.size();
    if (Status s = write_all(to, std::move(puts)); !s) return s.error();
  }
  return copied;
}

}  // namespace ag::store
