#include "cli/doctor_findings.h"

#include <cctype>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "api/protocol.h"

namespace ag::cli {
namespace {

using nlohmann::json;
constexpr const char* kReportPrefix = "AG_DOCTOR ";

bool loopback(const std::string& ip) { return ip.rfind("127.", 0) == 0 || ip == "::1"; }

// "node_ab12 (10.0.0.2)"
std::string node_name(const ProbeReport& r) { return r.node_id + " (" + r.node_ip + ")"; }

std::string seconds(int64_t ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", std::fabs(static_cast<double>(ms)) / 1000.0);
  return buf;
}

const char* status_word(Finding::Status s) {
  switch (s) {
    case Finding::Status::kOk:
      return "ok";
    case Finding::Status::kWarn:
      return "warn";
    case Finding::Status::kFail:
      return "FAIL";
  }
  return "?";
}

void nodes_finding(const std::vector<ProbeReport>& reports, const ProbeSetting& setting, std::vector<Finding>& out) {
  std::set<int> reported;
  std::map<std::string, const ProbeReport*> nodes;
  for (const auto& r : reports) {
    reported.insert(r.rank);
    nodes.emplace(r.node_id, &r);
  }
  std::string missing;
  for (int rank = 0; rank < setting.ranks; ++rank) {
    if (!reported.count(rank)) missing += (missing.empty() ? "" : ", ") + std::to_string(rank);
  }
  if (!missing.empty()) {
    out.push_back({"nodes", Finding::Status::kFail,
                   "ranks " + missing + " of the probe reported nothing",
                   "their output says why: ag logs on the probe job (ag doctor prints its id)"});
    return;
  }
  std::string list;
  for (const auto& [id, r] : nodes) list += (list.empty() ? "" : ", ") + node_name(*r) + " " + r->ifname;
  if (static_cast<int>(nodes.size()) < setting.ranks) {
    out.push_back({"nodes", Finding::Status::kWarn,
                   std::to_string(setting.ranks) + " ranks ran on only " + std::to_string(nodes.size()) +
                       " nodes (" + list + "): traffic between those ranks never left their machine",
                   "run ag doctor --nodes " + std::to_string(nodes.size()) +
                       " or add nodes; `ag list-nodes` shows which are alive"});
    return;
  }
  out.push_back({"nodes", Finding::Status::kOk, std::to_string(setting.ranks) + " ranks on " +
                                                     std::to_string(nodes.size()) + " nodes: " + list, ""});
}

void ports_finding(const std::vector<ProbeReport>& reports, const ProbeSetting& setting, std::vector<Finding>& out) {
  const ProbeReport* master = nullptr;
  for (const auto& r : reports) {
    if (r.rank == 0) master = &r;
  }
  const std::string where = setting.master_addr + ":" + std::to_string(setting.master_port);
  bool all = true;
  for (const auto& r : reports) {
    if (r.rank == 0 || r.reached_master.value_or(false)) continue;
    all = false;
    out.push_back({"ports", Finding::Status::kFail,
                   "rank " + std::to_string(r.rank) + " on " + node_name(r) + " cannot reach rank 0 on " +
                       (master ? node_name(*master) : std::string("its node")) + " at " + where +
                       (r.master_error.empty() ? "" : ": " + r.master_error),
                   "open TCP ports " + std::to_string(api::kMasterPortFirst) + "-" +
                       std::to_string(api::kMasterPortLast) +
                       " (the master ports) and the ports collectives open between the workers' addresses "
                       "(a firewall on " + (master ? master->node_ip : setting.master_addr) +
                       ", or a security group, drops them)"});
  }
  if (all) {
    out.push_back({"ports", Finding::Status::kOk,
                   "every rank reached rank 0's master port " + where, ""});
  }
}

void hostname_and_interface_findings(const std::vector<ProbeReport>& reports, std::vector<Finding>& out) {
  std::set<std::string> seen;
  bool hostnames_ok = true, interfaces_ok = true;
  for (const auto& r : reports) {
    if (!seen.insert(r.node_id).second) continue;
    if (r.ifname.empty()) {
      interfaces_ok = false;
      out.push_back({"interface", Finding::Status::kFail,
                     "tasks on " + node_name(r) + " get no GLOO_SOCKET_IFNAME: gloo and NCCL pick an interface by "
                     "the hostname",
                     "run the same AetherGrid release on the workers as here (its workers name the interface), or "
                     "set GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME in the job (ag submit --env)"});
    } else if (!r.if_ip.empty() && r.if_ip != r.node_ip && !(loopback(r.if_ip) && loopback(r.node_ip))) {
      interfaces_ok = false;
      out.push_back({"interface", Finding::Status::kFail,
                     "on " + node_name(r) + " the tasks' interface " + r.ifname + " has " + r.if_ip +
                         ", not the node's address " + r.node_ip,
                     "restart that worker with --network-interface naming the interface that holds " + r.node_ip +
                         ", or with --node-ip-address " + r.if_ip});
    }
    if (r.hostname_ip.empty()) {
      hostnames_ok = false;
      out.push_back({"hostname", Finding::Status::kWarn,
                     "on " + node_name(r) + " the hostname " + r.hostname + " does not resolve",
                     "add \"" + r.node_ip + " " + r.hostname + "\" to /etc/hosts there: some tools need it"});
    } else if (loopback(r.hostname_ip) && !loopback(r.node_ip)) {
      hostnames_ok = false;
      out.push_back({"hostname", Finding::Status::kWarn,
                     "on " + node_name(r) + " the hostname " + r.hostname + " resolves to " + r.hostname_ip +
                         " (loopback): jobs here are told " + (r.ifname.empty() ? "no interface" : r.ifname) +
                         " and connect, but a tool that goes by the hostname would tell other machines " +
                         r.hostname_ip,
                     "map " + r.hostname + " to " + r.node_ip + " in /etc/hosts there (Debian and Ubuntu map it "
                     "to 127.0.1.1)"});
    }
  }
  if (interfaces_ok) {
    out.push_back({"interface", Finding::Status::kOk,
                   "every node's tasks use the interface that holds its address", ""});
  }
  if (hostnames_ok) out.push_back({"hostname", Finding::Status::kOk, "no node's hostname points to loopback", ""});
}

void clock_finding(const std::vector<ProbeReport>& reports, const ProbeSetting& setting, std::vector<Finding>& out) {
  int64_t largest = 0;
  bool all = true;
  std::set<std::string> seen;
  for (const auto& r : reports) {
    if (!seen.insert(r.node_id).second) continue;
    const int64_t skew = r.time_ms - r.received_ms;
    const int64_t size = skew < 0 ? -skew : skew;
    largest = std::max(largest, size);
    if (size <= setting.max_skew_ms) continue;
    all = false;
    out.push_back({"clocks", Finding::Status::kFail,
                   "the clock of " + node_name(r) + " is " + seconds(skew) + (skew > 0 ? " ahead of" : " behind") +
                       " the head's",
                   "keep every machine's clock in time (chrony or systemd-timesyncd); job times, log times and "
                   "token lifetimes compare clocks"});
  }
  if (all) {
    out.push_back({"clocks", Finding::Status::kOk,
                   "every node within " + seconds(setting.max_skew_ms) + " of the head (largest " + seconds(largest) +
                       ")",
                   ""});
  }
}

void gpu_findings(const std::vector<ProbeReport>& reports, std::vector<Finding>& out) {
  bool all = true;
  for (const auto& r : reports) {
    std::string problem, fix;
    if (r.torch.empty()) {
      problem = "torch cannot be imported on " + node_name(r) + (r.torch_error.empty() ? "" : ": " + r.torch_error);
      fix = "install PyTorch for the workers' python3 there, or run jobs in an image that has it (--image)";
    } else if (!r.cuda) {
      problem = "torch " + r.torch + " on " + node_name(r) + " sees no GPU";
      fix = "check the NVIDIA driver there (nvidia-smi) and that torch was built with CUDA";
    } else if (r.nccl.empty()) {
      problem = "torch " + r.torch + " on " + node_name(r) + " has no NCCL";
      fix = "install a CUDA build of PyTorch that ships NCCL";
    }
    if (problem.empty()) continue;
    all = false;
    out.push_back({"gpu", Finding::Status::kFail, problem, fix});
  }
  if (all) out.push_back({"gpu", Finding::Status::kOk, "every rank has torch with CUDA and NCCL", ""});
}

}  // namespace

Result<std::optional<ProbeReport>> parse_probe_line(const std::string& line, int64_t received_ms) {
  if (line.rfind(kReportPrefix, 0) != 0) return std::optional<ProbeReport>();
  json j = json::parse(line.substr(std::strlen(kReportPrefix)), nullptr, false);
  if (!j.is_object()) return invalid_argument("a probe report that is not JSON: " + line.substr(0, 200));
  ProbeReport r;
  try {
    r.rank = j.at("rank").get<int>();
    r.node_id = j.value("node_id", "");
    r.node_ip = j.value("node_ip", "");
    r.hostname = j.value("hostname", "");
    r.hostname_ip = j.value("hostname_ip", "");
    r.ifname = j.value("ifname", "");
    r.if_ip = j.value("if_ip", "");
    if (j.contains("reached_master")) r.reached_master = j.at("reached_master").get<bool>();
    r.master_error = j.value("master_error", "");
    r.connected_ranks = j.value("connected_ranks", std::vector<int>{});
    r.time_ms = j.at("time_ms").get<int64_t>();
    r.torch = j.value("torch", "");
    r.torch_error = j.value("torch_error", "");
    r.cuda = j.value("cuda", false);
    r.gpus = j.value("gpus", 0);
    r.nccl = j.value("nccl", "");
  } catch (const json::exception& e) {
    return invalid_argument(std::string("a probe report without its fields (") + e.what() + ")");
  }
  r.received_ms = received_ms;
  return std::optional<ProbeReport>(std::move(r));
}

std::vector<Finding> probe_findings(const std::vector<ProbeReport>& reports, const ProbeSetting& setting) {
  std::vector<Finding> out;
  nodes_finding(reports, setting, out);
  if (reports.empty()) return out;
  ports_finding(reports, setting, out);
  hostname_and_interface_findings(reports, out);
  clock_finding(reports, setting, out);
  if (setting.gpus) gpu_findings(reports, out);
  return out;
}

bool any_failed(const std::vector<Finding>& findings) {
  for (const auto& f : findings) {
    if (f.status == Finding::Status::kFail) return true;
  }
  return false;
}

std::string render_findings(const std::string& head, const std::vector<Finding>& findings) {
  std::string out = "ag doctor: head " + head + "\n";
  int failed = 0, warned = 0;
  for (const auto& f : findings) {
    char label[32];
    std::snprintf(label, sizeof label, "  %-5s %-10s ", status_word(f.status), f.check.c_str());
    out += label + f.detail + "\n";
    if (!f.fix.empty()) out += std::string(19, ' ') + "fix: " + f.fix + "\n";
    failed += f.status == Finding::Status::kFail;
    warned += f.status == Finding::Status::kWarn;
  }
  if (failed == 0 && warned == 0) return out + "All " + std::to_string(findings.size()) + " checks passed.\n";
  return out + std::to_string(failed) + (failed == 1 ? " problem" : " problems") + " and " + std::to_string(warned) +
         (warned == 1 ? " warning" : " warnings") + " (ag doctor -o json for scripts).\n";
}

json findings_json(const std::string& head, const std::vector<Finding>& findings) {
  json checks = json::array();
  for (const auto& f : findings) {
    std::string status = status_word(f.status);
    for (auto& c : status) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    checks.push_back({{"check", f.check}, {"status", status}, {"detail", f.detail}, {"fix", f.fix}});
  }
  return {{"ok", !any_failed(findings)}, {"head", head}, {"checks", checks}};
}

}  // namespace ag::cli
