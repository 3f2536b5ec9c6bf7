// Internal to net/: the client side of TLS for http_client.cc and ws_client.cc. One
// OpenSSL context per CA, and the last session per head, kept for the process's life,
// so that repeated calls resume a session instead of a full handshake.
#pragma once

#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/ssl.hpp>
#include <openssl/ssl.h>
#include <memory>
#include <string>

#include "net/http_client.h"

namespace ag::net::detail {

using TlsClientStream = boost::beast::ssl_stream<boost::beast::tcp_stream>;

// The context for calls to `to`: verifying the head's certificate against to.ca_pem,
// or (to.tls_unverified) not at all. Errors: kInvalidArgument for a CA that does not parse.
Result<std::shared_ptr<boost::asio::ssl::context>> client_context(const Endpoint& to);

// Before the handshake of `ssl` (an asio stream's native_handle(), or a TlsSocket's):
// SNI, the name or address the certificate must carry (checked by OpenSSL as it
// verifies the chain), and the session kept from an earlier connection to the same head.
void prepare_client(SSL* ssl, const Endpoint& to);

// After a handshake: keeps its session for the next connection to `to`.
void remember_session(SSL* ssl, const Endpoint& to);

// Whether a failed handshake failed because the head's certificate does not verify
// (not the pinned CA's, or not naming the head): a refusal no retry will change.
bool head_unverified(SSL* ssl);

// A failed handshake, for people: "the head's certificate does not verify against the
// pinned cluster CA ...", or `library_words` (what the TLS library said).
std::string handshake_failure(const std::string& library_words, SSL* ssl, const Endpoint& to);

}  // namespace ag::net::detail
