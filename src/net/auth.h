// Bearer-token authentication for every API call and worker join.
#pragma once

#include <string>

#include "common/result.h"
#include "net/http_types.h"

namespace ag::net {

// True when the request carries `token` as "Authorization: Bearer <token>".
// Compares in constant time.
bool has_valid_token(const HttpRequest& request, const std::string& token);

// Creates the cluster token file in `data_dir` (mode 0600) if absent and returns the
// token. Errors: kInternal when the file cannot be written or read.
Result<std::string> load_or_create_token(const std::string& data_dir);

// Reads a token file. Errors: kNotFound / kInternal naming the path.
Result<std::string> read_token_file(const std::string& path);

}  // namespace ag::net
