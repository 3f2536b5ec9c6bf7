// SHA-256 of byte strings, as lowercase hex (content addresses of packages).
#pragma once

#include <string>
#include <string_view>

namespace ag {

std::string sha256_hex(std::string_view data);

// Bytes as lowercase hex, two characters a byte.
std::string hex_encode(const unsigned char* bytes, size_t size);

// True for 64 lowercase hex characters.
bool is_sha256_hex(std::string_view text);

}  // namespace ag
