// What a job asks of containers: its image and the node paths it mounts. Checked at
// submit (pure functions here), again by the worker against its own allowed prefixes.
//
//   runtime_env.image   "registry.example:5000/team/train:1.4", "debian", "x@sha256:<hex>"
//   runtime_env.mounts  [{"source": "/data/imagenet", "target": "/data", "read_only": true}]
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ag::api {

inline constexpr size_t kMaxMounts = 32;
inline constexpr size_t kMaxMountPathBytes = 1024;
inline constexpr size_t kMaxImageBytes = 512;
inline constexpr size_t kMaxAllowedMountPrefixes = 64;

struct Mount {
  std::string source;  // absolute path on the node
  std::string target;  // absolute path in the container
  bool read_only = false;
  bool operator==(const Mount&) const = default;
};

// Why `ref` is not an image reference an engine would take ("" when it is).
std::string image_reference_problem(std::string_view ref);

// Why `path` cannot be a mount's source or target ("" when it can): absolute, no
// "." or ".." parts, none of the characters engines' mount syntax gives meaning to.
std::string mount_path_problem(std::string_view path);

// Why the mounts cannot go together (the same target twice), "" when they can.
std::string mounts_problem(const std::vector<Mount>& mounts);

// The first prefix of `allowed` that holds `path`, if any.
std::optional<std::string> allowing_prefix(std::string_view path, const std::vector<std::string>& allowed);

}  // namespace ag::api
