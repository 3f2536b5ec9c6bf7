// The dashboard's web assets (the repository's dashboard/ folder), compiled into the
// binary by embed_assets.cmake. Read-only static data; any thread.
#pragma once

#include <cstddef>
#include <string_view>

namespace ag::head::dashboard {

// One embedded file: its path under dashboard/ ("app.js") and its bytes.
struct EmbeddedFile {
  std::string_view path;
  std::string_view bytes;
};

// The generated table (embedded_assets.cc in the build dir).
extern const EmbeddedFile kEmbeddedFiles[];
extern const size_t kEmbeddedFileCount;

struct Asset {
  std::string_view bytes;
  std::string_view content_type;  // from the file name's extension
};

// The asset at `path` under dashboard/ ("app.js", no leading slash), or nullptr.
const Asset* find_asset(std::string_view path);

}  // namespace ag::head::dashboard
