#include <openssl/rand.h>
#include <sys/random.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <stdexcept>

#include "common/clock.h"
#include "common/ids.h"
#include "common/result.h"
#include "common/sha256.h"

namespace ag {

int http_status_for(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument: return 400;
    case ErrorCode::kUnauthenticated: return 401;
    case ErrorCode::kPermissionDenied: return 403;
    case ErrorCode::kNotFound: return 404;
    case ErrorCode::kConflict: return 409;
    case ErrorCode::kTooLarge: return 413;
    case ErrorCode::kUnavailable: return 503;
    case ErrorCode::kResourceExhausted: return 507;
    case ErrorCode::kInternal: return 500;
  }
  return 500;
}

int64_t SystemClock::now_ms() const {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

int64_t SystemClock::steady_ms() const {
  using namespace std::chrono;
  return duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count();
}

std::string random_hex(int n_bytes) {
  std::string bytes(static_cast<size_t>(n_bytes), '\0');
  // The kernel's generator: as good as OpenSSL's for ids and secrets, and one system
  // call where OpenSSL's own generator costs more per id than a job's submit.
  size_t got = 0;
  while (got < bytes.size()) {
    ssize_t n = ::getrandom(bytes.data() + got, bytes.size() - got, 0);
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (errno != EINTR) {
      if (RAND_bytes(reinterpret_cast<unsigned char*>(bytes.data()), n_bytes) != 1) {
        throw std::runtime_error("the OS random number generator failed");
      }
      break;
    }
  }
  return hex_encode(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
}

std::string new_job_id() { return "job_" + random_hex(6); }
std::string new_node_id() { return "node_" + random_hex(6); }

bool looks_like_job_id(const std::string& id) {
  if (id.size() < 16 || id.rfind("job_", 0) != 0) return false;
  for (size_t i = 4; i < 16; ++i) {
    char c = id[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  if (id.size() == 16) return true;
  // An array element: "_" and its index, 1 to 6 digits.
  if (id[16] != '_' || id.size() < 18 || id.size() > 23) return false;
  for (size_t i = 17; i < id.size(); ++i) {
    if (id[i] < '0' || id[i] > '9') return false;
  }
  return true;
}

}  // namespace ag
