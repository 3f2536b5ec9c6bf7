// libpq, loaded when a head is first pointed at a PostgreSQL store rather than linked:
// the release `ag` stays one binary that needs nothing but glibc, and a head on SQLite
// never loads it. PostgreSQL users get the library with their client tools (Debian's
// `libpq5`). ADR 0008 says why.
#pragma once

#include <libpq-fe.h>

#include "common/result.h"

namespace ag::store {

// The libpq functions the PostgreSQL store calls, by their libpq names.
struct LibPq {
  decltype(&::PQconnectdbParams) PQconnectdbParams;
  decltype(&::PQfinish) PQfinish;
  decltype(&::PQreset) PQreset;
  decltype(&::PQstatus) PQstatus;
  decltype(&::PQerrorMessage) PQerrorMessage;
  decltype(&::PQsetNoticeProcessor) PQsetNoticeProcessor;
  decltype(&::PQexec) PQexec;
  decltype(&::PQexecParams) PQexecParams;
  decltype(&::PQresultStatus) PQresultStatus;
  decltype(&::PQresultErrorField) PQresultErrorField;
  decltype(&::PQclear) PQclear;
  decltype(&::PQntuples) PQntuples;
  decltype(&::PQgetvalue) PQgetvalue;
  decltype(&::PQgetlength) PQgetlength;
  decltype(&::PQgetisnull) PQgetisnull;
};

// The library, loaded on the first call (libpq.so.5). Errors: kUnavailable naming the
// package to install when it is not on this machine. Thread-safe.
Result<const LibPq*> libpq();

}  // namespace ag::store
