#include "head/dashboard/assets.h"

#include <map>
#include <string>

namespace ag::head::dashboard {
namespace {

std::string_view content_type_for(std::string_view path) {
  auto ends_with = [&](std::string_view ext) {
    return path.size() >= ext.size() && path.substr(path.size() - ext.size()) == ext;
  };
  if (ends_with(".html")) return "text/html; charset=utf-8";
  if (ends_with(".js")) return "text/javascript; charset=utf-8";
  if (ends_with(".css")) return "text/css; charset=utf-8";
  if (ends_with(".svg")) return "image/svg+xml";
  if (ends_with(".png")) return "image/png";
  if (ends_with(".json")) return "application/json";
  return "application/octet-stream";
}

// Built once, on first use; the table never changes afterwards.
const std::map<std::string_view, Asset>& index() {
  static const std::map<std::string_view, Asset> assets = [] {
    std::map<std::string_view, Asset> out;
    for (size_t i = 0; i < kEmbeddedFileCount; ++i) {
      out[kEmbeddedFiles[i].path] = {kEmbeddedFiles[i].bytes, content_type_for(kEmbeddedFiles[i].path)};
    }
    return out;
  }();
  return assets;
}

}  // namespace

const Asset* find_asset(std::string_view path) {
  auto it = index().find(path);
  return it == index().end() ? nullptr : &it->second;
}

}  // namespace ag::head::dashboard
