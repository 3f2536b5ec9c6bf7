// SHA-256 of byte strings, as lowercase hex (content addresses of packages).
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace ag {

std::string sha256_hex(std::string_view data);

// SHA-256 over bytes that arrive in pieces (streamed uploads and downloads).
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void update(const void* data, size_t size);
  // The digest as lowercase hex; the hasher is spent afterwards.
  std::string finish_hex();

 private:
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
};

// Bytes as lowercase hex, two characters a byte.
std::string hex_encode(const unsigned char* bytes, size_t size);

// True for 64 lowercase hex characters.
bool is_sha256_hex(std::string_view text);

}  // namespace ag
