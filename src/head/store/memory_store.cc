#include "head/store/memory_store.h"

namespace ag::store {

void MemoryStore::write(std::vector<Mutation> batch, std::function<void(Status)> done) {
  Status status;
  {
    std::lock_guard lock(mu_);
    if (holding_) {
      held_.emplace_back(std::move(batch), std::move(done));
      return;
    }
    ++writes_;
    if (failures_left_ > 0) {
      --failures_left_;
      status = Error{ErrorCode::kResourceExhausted, "no space left on device (simulated)"};
    } else {
      for (auto& m : batch) {
        auto& table = tables_[m.table];
        if (m.value) {
          table[m.key] = std::move(*m.value);
        } else {
          table.erase(m.key);
        }
      }
    }
  }
  done(status);
}

Result<std::vector<Record>> MemoryStore::scan(const std::string& table) {
  std::lock_guard lock(mu_);
  std::vector<Record> out;
  auto it = tables_.find(table);
  if (it == tables_.end()) return out;
  for (const auto& [k, v] : it->second) out.emplace_back(k, v);
  return out;
}

Result<std::vector<std::string>> MemoryStore::tables() {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  for (const auto& [name, records] : tables_) {
    if (!records.empty()) out.push_back(name);
  }
  return out;
}

Result<std::optional<std::string>> MemoryStore::get(const std::string& table,
                                                    const std::string& key) {
  std::lock_guard lock(mu_);
  auto it = tables_.find(table);
  if (it == tables_.end()) return std::optional<std::string>();
  auto kv = it->second.find(key);
  if (kv == it->second.end()) return std::optional<std::string>();
  return std::optional<std::string>(kv->second);
}

void MemoryStore::hold_writes() {
  std::lock_guard lock(mu_);
  holding_ = true;
}

void MemoryStore::release_writes() {
  decltype(held_) held;
  {
    std::lock_guard lock(mu_);
    holding_ = false;
    held.swap(held_);
  }
  for (auto& [batch, done] : held) write(std::move(batch), std::move(done));
}

void MemoryStore::fail_next_writes(int count) {
  std::lock_guard lock(mu_);
  failures_left_ = count;
}

}  // namespace ag::store
