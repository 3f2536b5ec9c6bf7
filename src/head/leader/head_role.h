// HeadRole: which head this is among heads sharing a store, as /api/version,
// /api/cluster and /metrics say it. A lone head (SQLite) leads at epoch 0. A head that
// runs its routes leads: a standby answers with StandbyServer instead.
#pragma once

#include <cstdint>
#include <string>

namespace ag::head {

struct HeadRole {
  std::string address;           // this head's API address
  int64_t epoch = 0;             // its lease's epoch; 0 for a lone head
  int64_t lease_ms = 0;          // 0 for a lone head
  std::string store = "sqlite";  // "sqlite" or "postgresql"
};

}  // namespace ag::head
