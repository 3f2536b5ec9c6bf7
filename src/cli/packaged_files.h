// The files under packaging/ that `ag install-service` writes, built into the binary
// when the build is configured (packaged_files.cc.in), so that the units and config
// files it installs are the same ones the packages ship.
#pragma once

#include <string_view>

namespace ag::cli {

struct PackagedFiles {
  std::string_view head_unit;    // packaging/systemd/aethergrid-head.service
  std::string_view worker_unit;  // packaging/systemd/aethergrid-worker.service
  std::string_view head_config;  // packaging/config/head.conf
  std::string_view worker_config;  // packaging/config/worker.conf
};

const PackagedFiles& packaged_files();

}  // namespace ag::cli
