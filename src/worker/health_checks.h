// HealthChecks: `ag start-worker --health-check CMD` (repeatable), each run through
// /bin/sh -c every interval, in its own process group, killed (the whole group) at the
// timeout, its output bounded: the last lines are kept for the reason, the rest read and
// dropped. A round runs every check at once; one that fails (exit status not 0, killed,
// timed out, could not start) makes the node unhealthy at once, and three passing
// rounds in a row make it healthy again. Each failing round, and the return to health,
// go to `report` (the agent sends them to the head). Io thread only.
//
//   tick --run every check--> all ended --> failed: report{healthy=false, reason}
//                                          passed: 3rd in a row after a failure: report{healthy}
#pragma once

#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/protocol.h"
#include "common/result.h"
#include "common/timers.h"

namespace ag::worker {

struct HealthCheckConfig {
  std::vector<std::string> commands;  // shell command lines
  int64_t interval_ms = 60000;
  int64_t timeout_ms = 30000;
};

// How many passing rounds in a row make an unhealthy node healthy again.
inline constexpr int kPassesToRecover = 3;
// The most of a check's output kept for its reason (its last lines).
inline constexpr size_t kKeptCheckOutputBytes = 1024;

class HealthChecks {
 public:
  using Report = std::function<void(const api::HealthReport&)>;
  HealthChecks(boost::asio::io_context& io, Timers& timers, HealthCheckConfig config, Report report);
  ~HealthChecks();
  HealthChecks(const HealthChecks&) = delete;
  HealthChecks& operator=(const HealthChecks&) = delete;

  // Runs the first round now, then one every interval.
  void start();
  // The failing report while the node is not healthy again: a registration carries it.
  const std::optional<api::HealthReport>& unhealthy() const { return unhealthy_; }
  // An admin cleared the node's mark: healthy until a check fails again.
  void clear() {
    unhealthy_.reset();
    passes_ = 0;
  }

  // Whether each command's program can run here: its first word an executable file, or
  // a command found on PATH (or a shell builtin). Errors name the command and the fix.
  static Status check_commands(const std::vector<std::string>& commands);

 private:
  struct Run;
  void run_round();
  void ended(size_t index, const std::string& failure);
  void round_done();

  boost::asio::io_context& io_;
  Timers& timers_;
  HealthCheckConfig config_;
  Report report_;
  std::optional<api::HealthReport> unhealthy_;
  int passes_ = 0;
  size_t running_ = 0;
  std::vector<std::string> failures_;  // this round's
  Timers::Id tick_ = 0;
  std::vector<std::shared_ptr<Run>> runs_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ag::worker
