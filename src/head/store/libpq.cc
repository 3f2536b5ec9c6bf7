#include "head/store/libpq.h"

#include <dlfcn.h>

#include <mutex>
#include <string>

namespace ag::store {
namespace {

template <typename F>
bool bind(void* handle, const char* name, F& slot, std::string& missing) {
  slot = reinterpret_cast<F>(::dlsym(handle, name));
  if (slot == nullptr) missing = name;
  return slot != nullptr;
}

Result<const LibPq*> load() {
  static LibPq pq{};
  void* handle = ::dlopen("libpq.so.5", RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = ::dlerror();
    return Error{ErrorCode::kUnavailable,
                 std::string("a PostgreSQL store needs libpq, which is not on this machine (") + (why ? why : "") +
                     "); install it (Debian/Ubuntu: apt-get install libpq5)"};
  }
  std::string missing;
  const bool all = bind(handle, "PQconnectdbParams", pq.PQconnectdbParams, missing) &&
                   bind(handle, "PQfinish", pq.PQfinish, missing) && bind(handle, "PQreset", pq.PQreset, missing) &&
                   bind(handle, "PQstatus", pq.PQstatus, missing) &&
                   bind(handle, "PQerrorMessage", pq.PQerrorMessage, missing) &&
                   bind(handle, "PQsetNoticeProcessor", pq.PQsetNoticeProcessor, missing) &&
                   bind(handle, "PQexec", pq.PQexec, missing) && bind(handle, "PQexecParams", pq.PQexecParams, missing) &&
                   bind(handle, "PQresultStatus", pq.PQresultStatus, missing) &&
                   bind(handle, "PQresultErrorField", pq.PQresultErrorField, missing) &&
                   bind(handle, "PQclear", pq.PQclear, missing) && bind(handle, "PQntuples", pq.PQntuples, missing) &&
                   bind(handle, "PQgetvalue", pq.PQgetvalue, missing) &&
                   bind(handle, "PQgetlength", pq.PQgetlength, missing) &&
                   bind(handle, "PQgetisnull", pq.PQgetisnull, missing);
  if (!all) {
    return Error{ErrorCode::kUnavailable,
                 "the libpq on this machine lacks " + missing + "; install a newer one (apt-get install libpq5)"};
  }
  return &pq;
}

}  // namespace

Result<const LibPq*> libpq() {
  static std::once_flag once;
  static Result<const LibPq*> loaded = Error{ErrorCode::kInternal, "libpq not loaded"};
  std::call_once(once, [] { loaded = load(); });
  return loaded;
}

}  // namespace ag::store
