// Identifiers: job ids, node ids, tokens. Random parts come from the OS's CSPRNG.
#pragma once

#include <string>

namespace ag {

// `n_bytes` random bytes as lowercase hex (2 * n_bytes characters).
std::string random_hex(int n_bytes);

// A new job id: "job_" followed by 12 hex characters.
std::string new_job_id();

// A new node id: "node_" followed by 12 hex characters.
std::string new_node_id();

// True when `id` has the shape of a job id, or of a job array's element (the array's id,
// "_" and the index: "job_0123456789ab_7"). Guards path building from user input.
bool looks_like_job_id(const std::string& id);

}  // namespace ag
