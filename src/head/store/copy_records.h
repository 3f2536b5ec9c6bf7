// Copying every record of one store into another: `ag admin copy-store`, which moves a
// lone head's SQLite state into the PostgreSQL store that standby heads share.
#pragma once

#include <map>
#include <string>

#include "head/store/kv_store.h"

namespace ag::store {

// Copies every table of `from` into `to`, in batches, and waits until it is durable;
// the number of records copied per table. With `replace`, what `to` held before is
// deleted first (otherwise records of the same key are overwritten and others kept).
// Errors: either store's; what was written before an error stays.
Result<std::map<std::string, size_t>> copy_records(KvStore& from, KvStore& to, bool replace);

}  // namespace ag::store
