#include "net/tls.h"

#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "common/ids.h"
#include "common/sha256.h"
#include "net/auth.h"

namespace ag::net {
namespace {

struct Free {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(X509* p) const { X509_free(p); }
  void operator()(BIO* p) const { BIO_free(p); }
};
using Key = std::unique_ptr<EVP_PKEY, Free>;
using Cert = std::unique_ptr<X509, Free>;
using Bio = std::unique_ptr<BIO, Free>;

constexpr long kCaDays = 3650;
constexpr long kHeadDays = 825;

std::string bio_text(BIO* bio) {
  char* data = nullptr;
  long size = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<size_t>(size));
}

std::string pem_of(X509* cert) {
  Bio bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(bio.get(), cert);
  return bio_text(bio.get());
}

std::string pem_of(EVP_PKEY* key) {
  Bio bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr);
  return bio_text(bio.get());
}

Cert cert_from(const std::string& pem) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  return Cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
}

Key key_from(const std::string& pem) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  return Key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
}

bool add_extension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (!ext) return false;
  bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

// A certificate for `subject_key`, named `common_name`, signed by `issuer_key` (as
// `issuer`, or itself when null).
Cert make_certificate(EVP_PKEY* subject_key, const std::string& common_name, X509* issuer, EVP_PKEY* issuer_key,
                      long days, const std::vector<std::pair<int, std::string>>& extensions) {
  Cert cert(X509_new());
  X509_set_version(cert.get(), 2);
  unsigned char serial[16];
  RAND_bytes(serial, sizeof serial);
  serial[0] &= 0x7f;  // a positive serial
  BIGNUM* bn = BN_bin2bn(serial, sizeof serial, nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get()));
  BN_free(bn);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);  // clocks a little behind still accept it
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), days * 24 * 3600);
  X509_set_pubkey(cert.get(), subject_key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("AetherGrid"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(common_name.c_str()), -1,
                             -1, 0);
  X509_set_issuer_name(cert.get(), issuer ? X509_get_subject_name(issuer) : name);
  for (const auto& [nid, value] : extensions) {
    if (!add_extension(cert.get(), issuer ? issuer : cert.get(), nid, value)) return nullptr;
  }
  if (X509_sign(cert.get(), issuer_key, EVP_sha256()) == 0) return nullptr;
  return cert;
}

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{ErrorCode::kNotFound, "cannot read " + path + ": " + std::strerror(errno)};
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Status write_private(const std::string& path, const std::string& text) { return write_token_file(path, text); }

bool is_ip(const std::string& text) {
  unsigned char buf[16];
  return ::inet_pton(AF_INET, text.c_str(), buf) == 1 || ::inet_pton(AF_INET6, text.c_str(), buf) == 1;
}

}  // namespace

Result<std::string> certificate_fingerprint(const std::string& pem) {
  Cert cert = cert_from(pem);
  if (!cert) return invalid_argument("no certificate in the PEM text");
  unsigned char* der = nullptr;
  int size = i2d_X509(cert.get(), &der);
  if (size <= 0) return invalid_argument("the certificate cannot be encoded");
  std::string hex = sha256_hex(std::string_view(reinterpret_cast<const char*>(der), static_cast<size_t>(size)));
  OPENSSL_free(der);
  return "sha256:" + hex;
}

Result<std::string> normalize_fingerprint(const std::string& text) {
  std::string hex = text.rfind("sha256:", 0) == 0 ? text.substr(7) : "";
  for (auto& c : hex) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (!is_sha256_hex(hex)) {
    return invalid_argument("'" + text + "' is not a CA fingerprint; expected sha256: and 64 hex digits, as `ag "
                            "start-head` prints it");
  }
  return "sha256:" + hex;
}

bool is_loopback_host(const std::string& host) {
  if (host == "localhost" || host == "::1" || host == "[::1]") return true;
  in_addr addr{};
  return ::inet_pton(AF_INET, host.c_str(), &addr) == 1 && (ntohl(addr.s_addr) >> 24) == 127;
}

Result<TlsIdentity> ensure_cluster_tls(const std::string& dir, const std::vector<std::string>& names,
                                       const std::string& cert_dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return internal_error("cannot create " + dir + ": " + ec.message());
  ::chmod(dir.c_str(), 0700);
  const std::string ca_key_path = dir + "/ca.key", ca_cert_path = dir + "/ca.crt";
  Key ca_key;
  Cert ca_cert;
  struct stat st {};
  if (::lstat(ca_key_path.c_str(), &st) == 0) {
    auto key_pem = read_private_token_file(ca_key_path);  // this user's, unreadable to others, not a link
    if (!key_pem.ok()) return key_pem.error();
    auto cert_pem = read_file(ca_cert_path);
    if (!cert_pem.ok()) return cert_pem.error();
    ca_key = key_from(key_pem.value() + "\n");
    ca_cert = cert_from(cert_pem.value());
    if (!ca_key || !ca_cert) return internal_error("the cluster CA in " + dir + " cannot be read (ca.key, ca.crt)");
  } else {
    ca_key = Key(EVP_EC_gen("P-256"));
    if (!ca_key) return internal_error("cannot make the cluster CA's key");
    // A name of its own: clients that pinned another cluster's CA never take this one
    // for it while building a chain.
    ca_cert = make_certificate(ca_key.get(), "AetherGrid cluster CA " + random_hex(4), nullptr, ca_key.get(), kCaDays,
                               {{NID_basic_constraints, "critical,CA:TRUE,pathlen:0"},
                                {NID_key_usage, "critical,keyCertSign,cRLSign"},
                                {NID_subject_key_identifier, "hash"}});
    if (!ca_cert) return internal_error("cannot make the cluster CA's certificate");
    if (Status s = write_private(ca_key_path, pem_of(ca_key.get())); !s) return s.error();
    if (Status s = write_private(ca_cert_path, pem_of(ca_cert.get())); !s) return s.error();
  }
  std::string sans;
  for (const auto& name : names) {
    if (name.empty()) continue;
    sans += (sans.empty() ? "" : ",") + std::string(is_ip(name) ? "IP:" : "DNS:") + name;
  }
  Key head_key(EVP_EC_gen("P-256"));
  if (!head_key) return internal_error("cannot make the head's TLS key");
  Cert head_cert = make_certificate(head_key.get(), names.empty() ? "aethergrid-head" : names.front(), ca_cert.get(),
                                    ca_key.get(), kHeadDays,
                                    {{NID_basic_constraints, "critical,CA:FALSE"},
                                     {NID_key_usage, "critical,digitalSignature"},
                                     {NID_ext_key_usage, "serverAuth"},
                                     {NID_authority_key_identifier, "keyid:always"},
                                     {NID_subject_alt_name, sans}});
  if (!head_cert) return internal_error("cannot make the head's TLS certificate (names: " + sans + ")");
  TlsIdentity out;
  out.ca_pem = pem_of(ca_cert.get());
  out.cert_chain_pem = pem_of(head_cert.get()) + out.ca_pem;
  out.key_pem = pem_of(head_key.get());
  const std::string certs = cert_dir.empty() ? dir : cert_dir;
  if (certs != dir) {
    std::filesystem::create_directories(certs, ec);
    if (ec) return internal_error("cannot create " + certs + ": " + ec.message());
    ::chmod(certs.c_str(), 0700);
  }
  if (Status s = write_private(certs + "/head.crt", out.cert_chain_pem); !s) return s.error();
  if (Status s = write_private(certs + "/head.key", out.key_pem); !s) return s.error();
  auto fingerprint = certificate_fingerprint(out.ca_pem);
  if (!fingerprint.ok()) return fingerprint.error();
  out.ca_fingerprint = fingerprint.value();
  return out;
}

Result<TlsIdentity> load_tls_identity(const std::string& cert_path, const std::string& key_path) {
  auto cert_pem = read_file(cert_path);
  if (!cert_pem.ok()) return invalid_argument("--tls-cert: " + cert_pem.error().message);
  auto key_pem = read_private_token_file(key_path);
  if (!key_pem.ok()) return invalid_argument("--tls-key: " + key_pem.error().message);
  Cert cert = cert_from(cert_pem.value());
  Key key = key_from(key_pem.value() + "\n");
  if (!cert) return invalid_argument("--tls-cert: " + cert_path + " holds no PEM certificate");
  if (!key) return invalid_argument("--tls-key: " + key_path + " holds no PEM private key");
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    return invalid_argument("--tls-key: " + key_path + " is not the key of the certificate in " + cert_path);
  }
  TlsIdentity out;
  out.cert_chain_pem = cert_pem.value();
  out.key_pem = key_pem.value() + "\n";
  return out;
}

}  // namespace ag::net
