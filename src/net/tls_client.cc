#include "net/tls_client.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <map>
#include <mutex>

namespace ag::net::detail {
namespace {

namespace asio = boost::asio;

std::mutex mu;

std::map<std::string, std::shared_ptr<asio::ssl::context>>& contexts() {
  static std::map<std::string, std::shared_ptr<asio::ssl::context>> by_ca;
  return by_ca;
}

struct SessionFree {
  void operator()(SSL_SESSION* s) const { SSL_SESSION_free(s); }
};

std::map<std::string, std::unique_ptr<SSL_SESSION, SessionFree>>& sessions() {
  static std::map<std::string, std::unique_ptr<SSL_SESSION, SessionFree>> by_head;
  return by_head;
}

}  // namespace

Result<std::shared_ptr<asio::ssl::context>> client_context(const Endpoint& to) {
  std::lock_guard lock(mu);
  std::string key = to.tls_unverified ? std::string("(unverified)") : !to.ca_pem.empty() ? to.ca_pem : "(system)";
  auto& cache = contexts();
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  auto ctx = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client);
  ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                   asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1);
  SSL_CTX_set_session_cache_mode(ctx->native_handle(), SSL_SESS_CACHE_CLIENT);
  if (to.tls_unverified) {
    ctx->set_verify_mode(asio::ssl::verify_none);
  } else if (to.ca_pem.empty()) {
    // The system's CAs: OpenSSL's default paths, which SSL_CERT_FILE and SSL_CERT_DIR move.
    boost::beast::error_code ec;
    ctx->set_default_verify_paths(ec);
    if (ec) return invalid_argument("the system's CA certificates cannot be read: " + ec.message());
    ctx->set_verify_mode(asio::ssl::verify_peer);
  } else {
    boost::beast::error_code ec;
    ctx->add_certificate_authority(asio::buffer(to.ca_pem), ec);
    if (ec) return invalid_argument("the cluster CA certificate cannot be used: " + ec.message());
    ctx->set_verify_mode(asio::ssl::verify_peer);
  }
  cache[key] = ctx;
  return ctx;
}

void prepare_client(SSL* ssl, const Endpoint& to) {
  boost::system::error_code ec;
  asio::ip::make_address(to.host, ec);
  if (ec) SSL_set_tlsext_host_name(ssl, to.host.c_str());  // SNI is for names only
  if (!to.tls_unverified) {
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
    if (ec) {
      X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
      X509_VERIFY_PARAM_set1_host(param, to.host.c_str(), 0);
    } else {
      X509_VERIFY_PARAM_set1_ip_asc(param, to.host.c_str());
    }
  }
  std::lock_guard lock(mu);
  auto it = sessions().find(to.to_string() + "|" + to.ca_pem);
  if (it != sessions().end()) SSL_set_session(ssl, it->second.get());
}

void remember_session(SSL* ssl, const Endpoint& to) {
  if (to.tls_unverified) return;
  SSL_SESSION* session = SSL_get1_session(ssl);
  if (!session) return;
  if (!SSL_SESSION_is_resumable(session)) {  // (no ticket yet): keep the one there is
    SSL_SESSION_free(session);
    return;
  }
  std::lock_guard lock(mu);
  sessions()[to.to_string() + "|" + to.ca_pem].reset(session);
}

bool head_unverified(SSL* ssl) { return SSL_get_verify_result(ssl) != X509_V_OK; }

std::string handshake_failure(const std::string& library_words, SSL* ssl, const Endpoint& to) {
  ERR_clear_error();
  long result = SSL_get_verify_result(ssl);
  if (result != X509_V_OK && to.service_tls) {
    return std::string("TLS: the certificate of ") + to.host + " does not verify against " +
           (to.ca_pem.empty() ? "this machine's CAs" : "the CA given") + " (" + X509_verify_cert_error_string(result) +
           "), or does not name it";
  }
  if (result != X509_V_OK) {
    return std::string("TLS: the head's certificate does not verify against the pinned cluster CA (") +
           X509_verify_cert_error_string(result) + "), or does not name " + to.host +
           " (is this the right head? a head whose data dir was reset has a new CA: pin its new fingerprint)";
  }
  return "TLS handshake failed: " + library_words;
}

}  // namespace ag::net::detail
