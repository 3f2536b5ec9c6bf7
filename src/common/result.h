// Result<T> and Error: how AetherGrid code reports failures a caller can act on.
//
// Errors are values. A function that can fail returns Result<T> (or Status when
// there is no value); the Error carries a code that maps to an HTTP status or exit
// code, and a message written for the user ("num_workers must be between 1 and
// 4096, got 0"). Exceptions do not cross module boundaries.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace ag {

enum class ErrorCode {
  kInvalidArgument,     // the request itself is wrong (HTTP 400)
  kUnauthenticated,     // missing or wrong token (HTTP 401)
  kPermissionDenied,    // authenticated, but not allowed to do this (HTTP 403)
  kNotFound,            // no such job / node / package (HTTP 404)
  kConflict,            // state does not allow it (HTTP 409)
  kTooLarge,            // body or package over its limit (HTTP 413)
  kUnavailable,         // cannot reach a peer, port busy (HTTP 503)
  kResourceExhausted,   // disk full and similar (HTTP 507)
  kInternal,            // a bug or an unexpected system error (HTTP 500)
};

struct Error {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;
};

inline Error invalid_argument(std::string message) {
  return {ErrorCode::kInvalidArgument, std::move(message)};
}
inline Error not_found(std::string message) { return {ErrorCode::kNotFound, std::move(message)}; }
inline Error internal_error(std::string message) {
  return {ErrorCode::kInternal, std::move(message)};
}

// HTTP status code that matches an error code.
int http_status_for(ErrorCode code);

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : data_(std::move(value)) {}          // NOLINT: implicit by design
  Result(Error error) : data_(std::move(error)) {}      // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(data_); }
  explicit operator bool() const { return ok(); }

  T& value() & {
    assert(ok());
    return std::get<T>(data_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<T>(data_);
  }
  T&& value() && {
    assert(ok());
    return std::get<T>(std::move(data_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() { return value(); }
  const T& operator*() const { return value(); }

  const Error& error() const {
    assert(!ok());
    return std::get<Error>(data_);
  }

 private:
  std::variant<T, Error> data_;
};

// Result of an operation that yields nothing but may fail.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT: implicit by design
  static Status Ok() { return {}; }

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return error_; }

 private:
  Error error_;
  bool ok_ = true;
};

}  // namespace ag
