// What `ag doctor` found, and what it makes of the reports its probe's ranks print: pure,
// so each finding and its fix is unit-tested without a cluster (cli/doctor.h runs it).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/result.h"

namespace ag::cli {

struct Finding {
  enum class Status { kOk, kWarn, kFail };
  std::string check;   // "head", "tls", "token", "clock", "nodes", "ports", "hostname", "interface", "gpu"
  Status status = Status::kOk;
  std::string detail;  // what was found
  std::string fix;     // what to do about it ("" when all is well)
};

// One rank of the probe job, as it reported itself (a line "AG_DOCTOR {json}").
struct ProbeReport {
  int rank = 0;
  std::string node_id;
  std::string node_ip;       // AG_NODE_IP: the address the node registered
  std::string hostname;
  std::string hostname_ip;   // what the hostname resolves to there ("" when it does not)
  std::string ifname;        // GLOO_SOCKET_IFNAME as the task got it
  std::string if_ip;         // the IPv4 address of that interface there ("" when none)
  std::optional<bool> reached_master;  // ranks > 0: whether rank 0's port answered
  std::string master_error;
  std::vector<int> connected_ranks;    // rank 0: the ranks that reached it
  int64_t time_ms = 0;       // the rank's clock when it reported
  int64_t received_ms = 0;   // the head's clock when the line arrived
  // With --gpus: torch's version ("" when it cannot be imported), CUDA, GPUs, NCCL.
  std::string torch;
  std::string torch_error;
  bool cuda = false;
  int gpus = 0;
  std::string nccl;
};

// The report in a line of the probe's output; nullopt for any other line. Errors: a
// report line that is not a report (kInvalidArgument).
Result<std::optional<ProbeReport>> parse_probe_line(const std::string& line, int64_t received_ms);

struct ProbeSetting {
  int ranks = 0;             // --nodes
  bool gpus = false;         // --gpus
  std::string master_addr;   // where rank 0 listened
  int master_port = 0;
  int64_t max_skew_ms = 1000;
};

// The findings from every rank's report: nodes (how many took part), ports (every rank
// reached rank 0), hostname (one that resolves to loopback on a node whose address is
// not), interface (each task's GLOO_SOCKET_IFNAME holds its node's address), clock
// (each node within max_skew_ms of the head), gpu (with --gpus: torch, CUDA, NCCL).
std::vector<Finding> probe_findings(const std::vector<ProbeReport>& reports, const ProbeSetting& setting);

// The checklist people read, one check a line and its fix under it, and a last line
// that counts the problems.
std::string render_findings(const std::string& head, const std::vector<Finding>& findings);
// {"ok": no check failed, "head": ..., "checks": [{"check", "status", "detail", "fix"}]}.
nlohmann::json findings_json(const std::string& head, const std::vector<Finding>& findings);
bool any_failed(const std::vector<Finding>& findings);

}  // namespace ag::cli
