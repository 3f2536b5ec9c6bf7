#include "cli/doctor.h"

#include <chrono>
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/api_client.h"
#include "cli/doctor_findings.h"
#include "cli/submit_options.h"
#include "common/version.h"

namespace ag::cli {
namespace {

using nlohmann::json;
using Status = Finding::Status;

// What each rank of the probe runs (python3 on the workers). Rank 0 listens on the
// master port; every other rank connects to it; each prints one report line.
constexpr const char* kProbe = R"PROBE(
import json, os, socket, sys, time
WAIT_S = float(sys.argv[1]); GPUS = sys.argv[2] == "1"
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
rep = {"rank": rank, "node_id": os.environ.get("AG_NODE_ID", ""), "node_ip": os.environ.get("AG_NODE_IP", ""),
       "hostname": socket.gethostname(), "ifname": os.environ.get("GLOO_SOCKET_IFNAME", "")}
try:
    rep["hostname_ip"] = socket.gethostbyname(rep["hostname"])
except OSError:
    rep["hostname_ip"] = ""
try:
    import fcntl, struct
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    packed = fcntl.ioctl(probe.fileno(), 0x8915, struct.pack("256s", rep["ifname"][:15].encode()))  # SIOCGIFADDR
    rep["if_ip"] = socket.inet_ntoa(packed[20:24])
except OSError:
    rep["if_ip"] = ""
deadline = time.time() + WAIT_S
if rank == 0:
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("", port))
    server.listen(world)
    server.settimeout(0.5)
    seen = set()
    while len(seen) < world - 1 and time.time() < deadline:
        try:
            peer, _ = server.accept()
        except socket.timeout:
            continue
        peer.settimeout(5)
        try:
            seen.add(int(peer.recv(16)))
            peer.sendall(b"ok")
        except (OSError, ValueError):
            pass
        peer.close()
    rep["connected_ranks"] = sorted(seen)
else:
    error = "no attempt"
    while time.time() < deadline:
        try:
            with socket.create_connection((addr, port), timeout=3) as conn:
                conn.sendall(str(rank).encode())
                if conn.recv(2) == b"ok":
                    error = ""
                    break
                error = "rank 0 closed the connection"
        except OSError as e:
            error = str(e)
        time.sleep(0.3)
    rep["reached_master"] = error == ""
    rep["master_error"] = error
if GPUS:
    try:
        import torch
        rep["torch"] = torch.__version__
        rep["cuda"] = torch.cuda.is_available()
        rep["gpus"] = torch.cuda.device_count() if rep["cuda"] else 0
        try:
            rep["nccl"] = ".".join(str(v) for v in torch.cuda.nccl.version()) if rep["cuda"] else ""
        except Exception:
            rep["nccl"] = ""
    except Exception as e:
        rep["torch"], rep["torch_error"] = "", str(e)
rep["time_ms"] = int(time.time() * 1000)
print("AG_DOCTOR " + json.dumps(rep), flush=True)
)PROBE";

// What a rank of the probe asks for: CPU caps are enforced, and python3 needs a few
// tenths of a CPU-second to start.
constexpr double kProbeCpus = 0.5;

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool contains(const std::string& text, const char* part) { return text.find(part) != std::string::npos; }

// The head answers, over TLS when a CA is pinned, and its clock agrees with this one's.
// False when it does not answer (the other checks need it).
bool check_head(const Connection& conn, std::vector<Finding>& out) {
  const std::string where = conn.endpoint.to_string();
  const int64_t sent = now_ms();
  auto health = call_json(conn, "GET", "/api/healthz", "", 10000);
  const int64_t answered = now_ms();
  if (!health.ok()) {
    const std::string& why = health.error().message;
    if (contains(why, "TLS")) {
      out.push_back({"tls", Status::kFail, why,
                     "pin this head's CA: ag config --address " + where +
                         " --ca-fingerprint sha256:... with the fingerprint `ag start-head` printed on its machine "
                         "(a head whose data dir was reset has a new one)"});
    } else {
      out.push_back({"head", Status::kFail, why,
                     "check that the head runs (`ag status` on its machine), that " + where +
                         " is its address and --port, and that no firewall between here and there drops port " +
                         std::to_string(conn.endpoint.port)});
    }
    return false;
  }
  std::string version;
  if (auto v = call_json(conn, "GET", "/api/version", "", 10000); v.ok()) version = v.value().value("version", "");
  out.push_back({"head", Status::kOk, "answers at " + where + (version.empty() ? "" : " (AetherGrid " + version + ")"),
                 ""});
  if (conn.endpoint.tls()) {
    out.push_back({"tls", Status::kOk, "the head's certificate verifies against the CA pinned for " + where, ""});
  } else {
    out.push_back({"tls", Status::kOk, "plain HTTP (a head on this machine, or --insecure)", ""});
  }
  if (!version.empty() && version != build_info().version) {
    out.push_back({"version", Status::kWarn,
                   "this ag is " + build_info().version + ", the head " + version,
                   "use the same AetherGrid release on every machine"});
  }
  const int64_t skew = (sent + answered) / 2 - health.value().value("time_ms", int64_t{0});
  if (health.value().contains("time_ms") && std::llabs(skew) > 1000) {
    char text[96];
    std::snprintf(text, sizeof text, "this machine's clock is %.1f s %s the head's",
                  static_cast<double>(std::llabs(skew)) / 1000, skew > 0 ? "ahead of" : "behind");
    out.push_back({"clock", Status::kFail, text, "keep every machine's clock in time (chrony or systemd-timesyncd)"});
  } else if (health.value().contains("time_ms")) {
    out.push_back({"clock", Status::kOk, "this machine's clock agrees with the head's (within 1 s)", ""});
  }
  return true;
}

bool check_token(const Connection& conn, std::vector<Finding>& out) {
  auto who = call_json(conn, "GET", "/api/whoami", "", 10000);
  if (!who.ok()) {
    out.push_back({"token", Status::kFail, who.error().message,
                   who.error().code == ErrorCode::kUnauthenticated
                       ? "the token is wrong, revoked, rotated or another cluster's: ask an admin for yours (ag user "
                         "rotate NAME) and keep it in a 0600 file named by AG_TOKEN_FILE"
                       : ""});
    return false;
  }
  out.push_back({"token", Status::kOk,
                 "works: " + who.value().value("name", "?") + " (" + who.value().value("role", "?") + ")", ""});
  return true;
}

// Runs the probe job and adds what its ranks reported.
void check_nodes(const Connection& conn, const DoctorOptions& options, std::vector<Finding>& out) {
  auto nodes = call_json(conn, "GET", "/api/nodes", "", 10000);
  if (!nodes.ok()) {
    out.push_back({"nodes", Status::kFail, nodes.error().message, ""});
    return;
  }
  int alive = 0;
  for (const auto& n : nodes.value()["nodes"]) alive += n.value("state", "") == "ALIVE" && !n.value("draining", false);
  if (alive < options.nodes) {
    out.push_back({"nodes", Status::kFail,
                   "--nodes " + std::to_string(options.nodes) + " asks for " + std::to_string(options.nodes) +
                       " nodes, but " + std::to_string(alive) + " are alive and not draining",
                   "start more workers (ag start-worker), or ask for fewer: ag doctor --nodes " +
                       std::to_string(std::max(alive, 1))});
    return;
  }
  const double wait_s = std::max(5.0, options.timeout_s / 2);
  char wait_text[32];
  std::snprintf(wait_text, sizeof wait_text, "%g", wait_s);
  json spec = {{"entrypoint", entrypoint_from_command({"python3", "-c", kProbe, wait_text, options.gpus ? "1" : "0"})},
               {"num_workers", options.nodes},
               {"placement", "spread"},
               {"task_options", {{"num_cpus", kProbeCpus}, {"num_gpus", options.gpus ? 1 : 0}}},
               {"job_name", "ag-doctor"},
               {"max_retries", 0},
               {"timeout", options.timeout_s}};
  auto created = call_json(conn, "POST", "/api/jobs", spec.dump(), 30000);
  if (!created.ok()) {
    out.push_back({"nodes", Status::kFail, "the probe job was refused: " + created.error().message, ""});
    return;
  }
  const std::string job_id = created.value()["job_id"].get<std::string>();
  const std::string path = "/api/jobs/" + job_id;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(options.timeout_s + 15);
  json job;
  for (;;) {
    auto waited = call_json(conn, "GET", path + "/wait?timeout_ms=5000", "", 20000);
    if (!waited.ok()) {
      out.push_back({"nodes", Status::kFail, "lost the head while the probe ran: " + waited.error().message, ""});
      return;
    }
    job = waited.value();
    const std::string state = job.value("state", "");
    if (state == "SUCCEEDED" || state == "FAILED" || state == "STOPPED") break;
    if (std::chrono::steady_clock::now() > deadline) {
      (void)call_json(conn, "POST", path + "/stop", "", 10000);  // best effort: it has a timeout of its own
      out.push_back({"nodes", Status::kFail,
                     "the probe job " + job_id + " did not finish in time (" + state + ": " + job.value("message", "") +
                         ")",
                     "ag status " + job_id + " -v says why"});
      return;
    }
  }
  std::vector<ProbeReport> reports;
  std::string cursor, bad_line;
  for (int pages = 0; pages < 100; ++pages) {
    auto page = call_json(conn, "GET", path + "/lines" + (cursor.empty() ? "" : "?from=" + cursor), "", 30000);
    if (!page.ok()) break;
    for (const auto& line : page.value()["lines"]) {
      auto report = parse_probe_line(line[2].get<std::string>(), line[1].get<int64_t>());
      if (!report.ok()) bad_line = report.error().message;
      if (report.ok() && report.value()) reports.push_back(std::move(*report.value()));
    }
    cursor.clear();
    for (const auto& next : page.value()["next"]) cursor += (cursor.empty() ? "" : ",") + std::to_string(next.get<int64_t>());
    if (!page.value().value("more", false)) break;
  }
  ProbeSetting setting;
  setting.ranks = options.nodes;
  setting.gpus = options.gpus;
  if (!job["attempts"].empty()) {
    setting.master_addr = job["attempts"][0].value("master_addr", "");
    setting.master_port = job["attempts"][0].value("master_port", 0);
  }
  std::vector<Finding> found = probe_findings(reports, setting);
  if (static_cast<int>(reports.size()) < options.nodes) {
    // Why ranks said nothing: the job's own reason (python3 missing, a task that could
    // not start), with its last lines.
    found.front().detail += " (probe job " + job_id + " " + job.value("state", "") + ": " + job.value("message", "") + ")";
    if (contains(job.value("message", ""), "python3")) {
      found.front().fix = "the probe runs python3 on the workers: install it there (apt-get install python3)";
    }
  } else {
    found.front().detail += " (probe job " + job_id + ")";
  }
  if (!bad_line.empty()) found.push_back({"nodes", Status::kWarn, bad_line, ""});
  out.insert(out.end(), found.begin(), found.end());
  // The probe leaves nothing behind.
  (void)call_json(conn, "DELETE", path, "", 10000);  // best effort: a finished job can be deleted later
}

}  // namespace

int doctor(const ConnectionOptions& options, const DoctorOptions& settings) {
  std::vector<Finding> findings;
  std::string head = options.address.empty() ? "(this machine's session)" : options.address;
  auto conn = resolve_connection(options);
  if (!conn.ok()) {
    findings.push_back({"config", Status::kFail, conn.error().message, ""});
  } else {
    head = conn->endpoint.to_string();
    if (check_head(conn.value(), findings) && check_token(conn.value(), findings) && settings.nodes > 0) {
      check_nodes(conn.value(), settings, findings);
    }
  }
  if (options.output == "json") {
    std::cout << findings_json(head, findings).dump(2) << "\n";
  } else {
    std::cout << render_findings(head, findings);
  }
  return any_failed(findings) ? 1 : 0;
}

}  // namespace ag::cli
