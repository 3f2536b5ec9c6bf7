// What `ag doctor` makes of its probe's reports (cli/doctor_findings.h): each finding
// from reports made up to show it, and the checklist and JSON it prints.
#include "cli/doctor_findings.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>

namespace ag::cli {
namespace {

using ::testing::HasSubstr;
using Status = Finding::Status;

ProbeReport rank(int r, const std::string& node, const std::string& ip) {
  ProbeReport p;
  p.rank = r;
  p.node_id = node;
  p.node_ip = ip;
  p.hostname = node + "-host";
  p.hostname_ip = ip;
  p.ifname = "eth0";
  p.if_ip = ip;
  if (r > 0) p.reached_master = true;
  p.time_ms = 1'000'000;
  p.received_ms = 1'000'050;
  return p;
}

ProbeSetting two_ranks() {
  ProbeSetting s;
  s.ranks = 2;
  s.master_addr = "10.0.0.2";
  s.master_port = 29517;
  return s;
}

// The first finding of `check` with `status` (a copy: callers pass temporaries).
std::optional<Finding> find(const std::vector<Finding>& findings, const std::string& check, Status status) {
  for (const auto& f : findings) {
    if (f.check == check && f.status == status) return f;
  }
  return std::nullopt;
}

TEST(DoctorFindings, ReportLinesAreReadAndOtherLinesSkipped) {
  auto report = parse_probe_line(
      R"(AG_DOCTOR {"rank": 1, "node_id": "node_b", "node_ip": "10.0.0.3", "hostname": "w2", "ifname": "eth0", )"
      R"("hostname_ip": "127.0.1.1", "if_ip": "10.0.0.3", "reached_master": false, "master_error": "timed out", )"
      R"("time_ms": 5000})",
      4000);
  ASSERT_TRUE(report.ok());
  ASSERT_TRUE(report.value().has_value());
  EXPECT_EQ(report.value()->rank, 1);
  EXPECT_EQ(report.value()->reached_master, false);
  EXPECT_EQ(report.value()->received_ms, 4000);
  EXPECT_FALSE(parse_probe_line("Traceback (most recent call last):", 0).value().has_value());
  EXPECT_FALSE(parse_probe_line("AG_DOCTOR {not json", 0).ok());
  EXPECT_FALSE(parse_probe_line(R"(AG_DOCTOR {"rank": 0})", 0).ok());  // no time
}

TEST(DoctorFindings, AHealthyPairPassesEveryCheck) {
  auto findings = probe_findings({rank(0, "node_a", "10.0.0.2"), rank(1, "node_b", "10.0.0.3")}, two_ranks());
  for (const auto& f : findings) EXPECT_EQ(f.status, Status::kOk) << f.check << ": " << f.detail;
  EXPECT_FALSE(any_failed(findings));
  EXPECT_THAT(render_findings("10.0.0.1:6379", findings), HasSubstr("All 5 checks passed."));
}

TEST(DoctorFindings, ARankThatCannotReachTheMasterPortIsAFailureWithTheRange) {
  ProbeReport blocked = rank(1, "node_b", "10.0.0.3");
  blocked.reached_master = false;
  blocked.master_error = "timed out";
  auto findings = probe_findings({rank(0, "node_a", "10.0.0.2"), blocked}, two_ranks());
  const std::optional<Finding> f = find(findings, "ports", Status::kFail);
  ASSERT_TRUE(f);
  EXPECT_THAT(f->detail, HasSubstr("rank 1 on node_b (10.0.0.3) cannot reach rank 0 on node_a (10.0.0.2) at "
                                   "10.0.0.2:29517: timed out"));
  EXPECT_THAT(f->fix, HasSubstr("open TCP ports 29500-31499"));
  EXPECT_TRUE(any_failed(findings));
}

TEST(DoctorFindings, AHostnameOnLoopbackIsAWarningAndAMissingInterfaceAFailure) {
  ProbeReport loop = rank(1, "node_b", "10.0.0.3");
  loop.hostname_ip = "127.0.1.1";
  auto findings = probe_findings({rank(0, "node_a", "10.0.0.2"), loop}, two_ranks());
  const std::optional<Finding> warned = find(findings, "hostname", Status::kWarn);
  ASSERT_TRUE(warned);
  EXPECT_THAT(warned->detail, HasSubstr("resolves to 127.0.1.1 (loopback)"));
  EXPECT_THAT(warned->fix, HasSubstr("map node_b-host to 10.0.0.3 in /etc/hosts"));
  EXPECT_FALSE(any_failed(findings));
  // On a test cluster of loopback addresses, loopback is where the hostname should point.
  ProbeReport local = rank(1, "node_b", "127.0.0.3");
  local.hostname_ip = "127.0.0.1";
  local.ifname = "lo";
  local.if_ip = "127.0.0.1";
  EXPECT_EQ(find(probe_findings({rank(0, "node_a", "10.0.0.2"), local}, two_ranks()), "hostname", Status::kWarn),
            std::nullopt);
  loop.ifname = "";
  const std::optional<Finding> failed = find(probe_findings({rank(0, "node_a", "10.0.0.2"), loop}, two_ranks()), "interface",
                               Status::kFail);
  ASSERT_TRUE(failed);
  EXPECT_THAT(failed->detail, HasSubstr("get no GLOO_SOCKET_IFNAME"));
}

TEST(DoctorFindings, AnInterfaceWithoutTheNodesAddressIsAFailure) {
  ProbeReport moved = rank(1, "node_b", "10.0.0.3");
  moved.if_ip = "192.168.1.7";
  const std::optional<Finding> f = find(probe_findings({rank(0, "node_a", "10.0.0.2"), moved}, two_ranks()), "interface",
                          Status::kFail);
  ASSERT_TRUE(f);
  EXPECT_THAT(f->detail, HasSubstr("interface eth0 has 192.168.1.7, not the node's address 10.0.0.3"));
  EXPECT_THAT(f->fix, HasSubstr("--network-interface"));
}

TEST(DoctorFindings, AClockMoreThanASecondOffIsAFailure) {
  ProbeReport ahead = rank(1, "node_b", "10.0.0.3");
  ahead.time_ms = ahead.received_ms + 3200;
  const std::optional<Finding> f = find(probe_findings({rank(0, "node_a", "10.0.0.2"), ahead}, two_ranks()), "clocks",
                          Status::kFail);
  ASSERT_TRUE(f);
  EXPECT_THAT(f->detail, HasSubstr("the clock of node_b (10.0.0.3) is 3.2 s ahead of the head's"));
  ahead.time_ms = ahead.received_ms - 900;  // within a second: fine
  EXPECT_EQ(find(probe_findings({rank(0, "node_a", "10.0.0.2"), ahead}, two_ranks()), "clocks", Status::kFail),
            std::nullopt);
}

TEST(DoctorFindings, MissingRanksAndSharedNodes) {
  const std::optional<Finding> missing =
      find(probe_findings({rank(0, "node_a", "10.0.0.2")}, two_ranks()), "nodes", Status::kFail);
  ASSERT_TRUE(missing);
  EXPECT_THAT(missing->detail, HasSubstr("ranks 1 of the probe reported nothing"));
  ProbeReport same = rank(1, "node_a", "10.0.0.2");
  const std::optional<Finding> shared =
      find(probe_findings({rank(0, "node_a", "10.0.0.2"), same}, two_ranks()), "nodes", Status::kWarn);
  ASSERT_TRUE(shared);
  EXPECT_THAT(shared->detail, HasSubstr("2 ranks ran on only 1 nodes"));
}

TEST(DoctorFindings, GpuChecksNameWhatIsMissing) {
  ProbeSetting gpus = two_ranks();
  gpus.gpus = true;
  ProbeReport no_torch = rank(0, "node_a", "10.0.0.2");
  no_torch.torch_error = "No module named 'torch'";
  ProbeReport no_gpu = rank(1, "node_b", "10.0.0.3");
  no_gpu.torch = "2.4.0";
  auto findings = probe_findings({no_torch, no_gpu}, gpus);
  std::string details;
  for (const auto& f : findings) {
    if (f.check == "gpu") details += f.detail + "\n";
  }
  EXPECT_THAT(details, HasSubstr("torch cannot be imported on node_a (10.0.0.2): No module named 'torch'"));
  EXPECT_THAT(details, HasSubstr("torch 2.4.0 on node_b (10.0.0.3) sees no GPU"));
}

TEST(DoctorFindings, TheChecklistAndItsJson) {
  std::vector<Finding> findings = {{"head", Status::kOk, "answers", ""},
                                   {"ports", Status::kFail, "rank 1 cannot reach rank 0", "open them"},
                                   {"hostname", Status::kWarn, "loopback", "map it"}};
  EXPECT_EQ(render_findings("h:1", findings),
            "ag doctor: head h:1\n"
            "  ok    head       answers\n"
            "  FAIL  ports      rank 1 cannot reach rank 0\n"
            "                   fix: open them\n"
            "  warn  hostname   loopback\n"
            "                   fix: map it\n"
            "1 problem and 1 warning (ag doctor -o json for scripts).\n");
  nlohmann::json j = findings_json("h:1", findings);
  EXPECT_FALSE(j["ok"].get<bool>());
  EXPECT_EQ(j["checks"][1]["status"], "fail");
  EXPECT_EQ(j["checks"][2]["fix"], "map it");
}

}  // namespace
}  // namespace ag::cli
