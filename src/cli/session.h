// The local session: what `ag start-head` and `ag start-worker` leave on this machine
// so that later commands of the same user find the cluster without flags.
//
//   $AG_SESSION_DIR (default /tmp/aethergrid-<uid>)/
//     session.json        head address, dashboard URL, data dir, token file
//     daemons/<name>.pid  one per daemon started here, read by `ag stop`
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "net/http_client.h"

namespace ag::cli {

std::string session_dir();

struct SessionInfo {
  std::string address;     // HOST:PORT of the head
  std::string dashboard;   // http://HOST:PORT
  std::string data_dir;    // head data dir
  std::string token_file;
  std::string ca_file;     // the cluster CA; "" when the head runs --insecure
};

Status write_session(const SessionInfo& info);
std::optional<SessionInfo> read_session();

// Records a daemon started from this machine; `ag stop` reads them back.
Status record_daemon(const std::string& name, int pid);
struct DaemonRecord {
  std::string name;
  int pid = 0;
  std::string pid_file;
};
std::vector<DaemonRecord> recorded_daemons();

// Options every command that talks to the head accepts.
struct ConnectionOptions {
  std::string address;  // --address, else AG_ADDRESS, else the session's head
  // --token, else --token-file, else AG_TOKEN, else AG_TOKEN_FILE, else the session's
  // token file (the first admin's, on the head's machine)
  std::string token;
  std::string token_file;
  std::string output = "table";  // --output table|json
  bool insecure = false;          // --insecure: plain HTTP even to another machine
};

struct Connection {
  // The head calls go to: the first address, then whichever head answered as the
  // leader (api_client.cc moves it when a head cannot be reached or stands by).
  mutable net::Endpoint endpoint;
  std::string token;
  // Every head of the cluster (--address h1:6379,h2:6379), each with its CA; one entry
  // for a lone head.
  std::vector<net::Endpoint> heads;
};

// The user's own settings, `ag config` (AG_CONFIG, default ~/.aethergrid/config.json):
// the default head address and, per head, the cluster CA pinned for it.
struct UserConfig {
  std::string address;
  std::map<std::string, std::string> ca_files;  // "HOST:PORT" -> PEM file
};
std::string user_config_path();
UserConfig read_user_config();
Status write_user_config(const UserConfig& config);

// The CA to verify the head at `endpoint` against (PEM), or "" for plain HTTP: one
// pinned with `ag config`; none (plain) for a head on this machine's loopback or with
// `insecure`; the session's for a head started here on another address. Errors: kInvalidArgument for
// another machine's head with no CA pinned, saying how to pin it.
Result<std::string> head_ca_for(const net::Endpoint& endpoint, bool insecure);

// Resolves where the head is and which token to use. Errors: kInvalidArgument when
// no address is known ("no cluster found: start one with `ag start-head` or pass
// --address"), the address is malformed, or both --token and --token-file are given;
// a token file others can read is refused (kPermissionDenied), as ssh does with keys.
// The file of the cluster CA known here for the head at `endpoint`: pinned with `ag
// config`, or the session's when that head was started on this machine; "" when none.
std::string known_ca_file(const net::Endpoint& endpoint);

Result<Connection> resolve_connection(const ConnectionOptions& options);

}  // namespace ag::cli
