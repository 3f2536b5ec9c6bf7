#include "cli/session.h"

#include <dirent.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/private_dir.h"
#include "net/auth.h"
#include "net/tls.h"

namespace ag::cli {

std::string session_dir() {
  if (const char* dir = std::getenv("AG_SESSION_DIR"); dir && *dir) return dir;
  return "/tmp/aethergrid-" + std::to_string(::getuid());
}

Status write_session(const SessionInfo& info) {
  if (Status s = ensure_private_dir(session_dir()); !s) return s;
  std::error_code ec;
  nlohmann::json j = {{"address", info.address}, {"dashboard", info.dashboard},
                      {"data_dir", info.data_dir}, {"token_file", info.token_file},
                      {"ca_file", info.ca_file}};
  std::string path = session_dir() + "/session.json";
  std::ofstream out(path + ".tmp");
  out << j.dump(2) << "\n";
  out.close();
  if (!out) return internal_error("cannot write " + path);
  std::filesystem::rename(path + ".tmp", path, ec);
  if (ec) return internal_error("cannot write " + path + ": " + ec.message());
  return {};
}

std::optional<SessionInfo> read_session() {
  std::ifstream in(session_dir() + "/session.json");
  if (!in) return std::nullopt;
  auto j = nlohmann::json::parse(in, nullptr, false);
  if (!j.is_object()) return std::nullopt;
  SessionInfo info;
  info.address = j.value("address", "");
  info.dashboard = j.value("dashboard", "");
  info.data_dir = j.value("data_dir", "");
  info.token_file = j.value("token_file", "");
  info.ca_file = j.value("ca_file", "");
  return info;
}

Status record_daemon(const std::string& name, int pid) {
  std::string dir = session_dir() + "/daemons";
  if (Status s = ensure_private_dir(session_dir()); !s) return s;
  if (Status s = ensure_private_dir(dir); !s) return s;
  std::ofstream out(dir + "/" + name + ".pid");
  out << pid << "\n";
  if (!out) return internal_error("cannot write " + dir + "/" + name + ".pid");
  return {};
}

std::vector<DaemonRecord> recorded_daemons() {
  std::vector<DaemonRecord> out;
  std::string dir = session_dir() + "/daemons";
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.path().extension() != ".pid") continue;
    std::ifstream in(entry.path());
    int pid = 0;
    if (!(in >> pid) || pid <= 0) continue;
    out.push_back({entry.path().stem().string(), pid, entry.path().string()});
  }
  return out;
}

std::string user_config_path() {
  if (const char* path = std::getenv("AG_CONFIG"); path && *path) return path;
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/") + "/.aethergrid/config.json";
}

UserConfig read_user_config() {
  UserConfig config;
  std::ifstream in(user_config_path());
  if (!in) return config;
  auto j = nlohmann::json::parse(in, nullptr, false);
  if (!j.is_object()) return config;
  config.address = j.value("address", "");
  if (j.contains("ca_files") && j["ca_files"].is_object()) {
    for (const auto& [head, file] : j["ca_files"].items()) {
      if (file.is_string()) config.ca_files[head] = file.get<std::string>();
    }
  }
  return config;
}

Status write_user_config(const UserConfig& config) {
  std::string path = user_config_path();
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (Status s = ensure_private_dir(dir); !s) return s;
  nlohmann::json j{{"address", config.address}, {"ca_files", config.ca_files}};
  std::ofstream out(path + ".tmp");
  out << j.dump(2) << "\n";
  out.close();
  std::error_code ec;
  if (out) std::filesystem::rename(path + ".tmp", path, ec);
  if (!out || ec) return internal_error("cannot write " + path);
  return {};
}

namespace {
Result<std::string> read_ca_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return internal_error("cannot read the cluster CA " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
}  // namespace

std::string known_ca_file(const net::Endpoint& endpoint) {
  UserConfig config = read_user_config();
  if (auto it = config.ca_files.find(endpoint.to_string()); it != config.ca_files.end()) return it->second;
  auto session = read_session();
  if (session && !session->ca_file.empty()) {
    auto here = net::parse_endpoint(session->address, 6379);
    if (here.ok() && here->to_string() == endpoint.to_string()) return session->ca_file;
  }
  return "";
}

Result<std::string> head_ca_for(const net::Endpoint& endpoint, bool insecure) {
  if (insecure) return std::string();
  // A CA pinned on purpose is always used.
  UserConfig config = read_user_config();
  if (auto it = config.ca_files.find(endpoint.to_string()); it != config.ca_files.end()) {
    return read_ca_file(it->second);
  }
  // A head on this machine's loopback is reached in plain HTTP: nothing leaves the
  // machine, and a new connection costs no handshake.
  if (net::is_loopback_host(endpoint.host)) return std::string();
  // A head started here on another address: the session's CA.
  auto session = read_session();
  if (session && !session->ca_file.empty()) {
    auto here = net::parse_endpoint(session->address, 6379);
    if (here.ok() && here->to_string() == endpoint.to_string()) return read_ca_file(session->ca_file);
  }
  return invalid_argument("the head at " + endpoint.to_string() +
                          " is on another machine and its cluster CA is not pinned here: run `ag config --address " +
                          endpoint.to_string() +
                          " --ca-fingerprint sha256:...` (`ag start-head` prints the fingerprint), or pass --insecure "
                          "to send your token in clear text");
}

Result<Connection> resolve_connection(const ConnectionOptions& options) {
  std::string address = options.address;
  if (address.empty()) {
    if (const char* env = std::getenv("AG_ADDRESS"); env && *env) address = env;
  }
  auto session = read_session();
  if (address.empty() && session) address = session->address;
  if (address.empty()) address = read_user_config().address;
  if (address.empty()) {
    return invalid_argument("no cluster found: start one with `ag start-head`, or pass --address HOST:PORT (or set AG_ADDRESS)");
  }
  auto heads = net::parse_endpoints(address, 6379);
  if (!heads.ok()) return heads.error();
  for (auto& head : heads.value()) {
    auto ca = head_ca_for(head, options.insecure);
    if (!ca.ok()) return ca.error();
    head.ca_pem = ca.value();
  }
  Connection conn{heads->front(), options.token, heads.value()};
  if (!options.token.empty() && !options.token_file.empty()) {
    return invalid_argument("give --token or --token-file, not both");
  }
  auto from_file = [](const std::string& flag, const std::string& path) -> Result<std::string> {
    auto token = net::read_private_token_file(path);
    if (!token.ok()) return Error{token.error().code, flag + ": " + token.error().message};
    return token;
  };
  if (conn.token.empty() && !options.token_file.empty()) {
    auto token = from_file("--token-file", options.token_file);
    if (!token.ok()) return token.error();
    conn.token = token.value();
  }
  if (conn.token.empty()) {
    if (const char* env = std::getenv("AG_TOKEN"); env && *env) conn.token = env;
  }
  if (conn.token.empty()) {
    if (const char* env = std::getenv("AG_TOKEN_FILE"); env && *env) {
      auto token = from_file("AG_TOKEN_FILE", env);
      if (!token.ok()) return token.error();
      conn.token = token.value();
    }
  }
  if (conn.token.empty() && session && !session->token_file.empty()) {
    auto token = net::read_token_file(session->token_file);
    if (token.ok()) conn.token = token.value();
  }
  return conn;
}

}  // namespace ag::cli
