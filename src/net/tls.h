// TLS for the head's ports: the cluster's own certificate authority, the head's
// certificate, and how clients pin the CA.
//
//   ag start-head  -> <data dir>/tls/ca.key, ca.crt (made once), head.key, head.crt
//                     (made at every start for the head's addresses, signed by the CA)
//   join line      -> --ca-fingerprint sha256:<hex of the CA certificate's DER>
//   worker / CLI   -> fetch_pinned_ca(): GET /api/tls/ca over an unverified TLS
//                     connection (nothing secret is sent), keep it only when its
//                     fingerprint is the pinned one, then verify the head against it
//                     on every connection (chain and address), as kubeadm's
//                     discovery hash does.
//
// Keys are ECDSA P-256, certificates SHA-256; all of it is OpenSSL's.
#pragma once

#include <string>
#include <vector>

#include "common/result.h"

namespace ag::net {

struct TlsIdentity {
  std::string cert_chain_pem;  // the head's certificate, then the CA's
  std::string key_pem;         // the head's private key
  std::string ca_pem;
  std::string ca_fingerprint;  // "sha256:..."
};

// Makes the cluster CA in `dir` when it is missing (ca.key mode 0600) and a new head
// certificate for `names` (IP addresses and DNS names) signed by it, written to
// `cert_dir` (head.crt, head.key; "" means `dir`: heads sharing one CA keep their own
// certificates apart). Errors: kInternal naming what failed; kPermissionDenied for a CA
// key others can read.
Result<TlsIdentity> ensure_cluster_tls(const std::string& dir, const std::vector<std::string>& names,
                                       const std::string& cert_dir = "");

// Reads a user-supplied certificate chain and key (`--tls-cert/--tls-key`), checking
// that they parse and belong together. Errors: kInvalidArgument saying which.
Result<TlsIdentity> load_tls_identity(const std::string& cert_path, const std::string& key_path);

// "sha256:" and the lowercase hex SHA-256 of the DER of the first certificate in
// `pem`. Errors: kInvalidArgument when `pem` holds no certificate.
Result<std::string> certificate_fingerprint(const std::string& pem);

// Accepts "sha256:HEX" (64 hex digits, any case). Errors: kInvalidArgument saying
// what was expected.
Result<std::string> normalize_fingerprint(const std::string& text);

// True for 127.0.0.0/8, ::1 and "localhost": traffic that never leaves the machine.
bool is_loopback_host(const std::string& host);

}  // namespace ag::net
