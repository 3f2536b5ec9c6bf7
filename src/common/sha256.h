// SHA-256 of byte strings, as lowercase hex (content addresses of packages).
#pragma once

#include <string>
#include <string_view>

namespace ag {

std::string sha256_hex(std::string_view data);

// True for 64 lowercase hex characters.
bool is_sha256_hex(std::string_view text);

}  // namespace ag
