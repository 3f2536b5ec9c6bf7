#include "net/tls_socket.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "net/tls_client.h"

namespace ag::net {
namespace {

// The errors OpenSSL queued for this thread, in words (and the queue emptied).
std::string library_errors() {
  std::string words;
  while (unsigned long code = ERR_get_error()) {
    char text[256];
    ERR_error_string_n(code, text, sizeof text);
    words += (words.empty() ? "" : "; ") + std::string(text);
  }
  return words;
}

}  // namespace

Result<std::unique_ptr<TlsSocket>> TlsSocket::client(int fd, const Endpoint& to) {
  auto ctx = detail::client_context(to);
  if (!ctx.ok()) return ctx.error();
  ERR_clear_error();
  SSL* ssl = SSL_new(ctx.value()->native_handle());
  if (!ssl) return Error{ErrorCode::kInternal, "cannot make a TLS session: " + library_errors()};
  std::unique_ptr<TlsSocket> socket(new TlsSocket(ssl, to));
  if (SSL_set_fd(ssl, fd) != 1) return Error{ErrorCode::kInternal, "cannot give TLS its socket: " + library_errors()};
  // Writes return after each record (the caller goes on from there), from wherever the
  // caller's bytes are now.
  SSL_set_mode(ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  // The kernel takes over the records after the handshake where it can (OpenSSL
  // leaves them here when the kernel refuses).
  SSL_set_options(ssl, SSL_OP_ENABLE_KTLS);
  // A peer that closes without TLS's close_notify has closed (what is sent carries its
  // own lengths, so nothing cut short passes for whole).
  SSL_set_options(ssl, SSL_OP_IGNORE_UNEXPECTED_EOF);
  detail::prepare_client(ssl, to);
  SSL_set_connect_state(ssl);
  return socket;
}

TlsSocket::~TlsSocket() { SSL_free(ssl_); }

SocketIo::Next TlsSocket::next_after(int ret, const char* what) {
  int saved_errno = errno;
  switch (SSL_get_error(ssl_, ret)) {
    case SSL_ERROR_WANT_READ:
      return SocketIo::Next::kWaitReadable;
    case SSL_ERROR_WANT_WRITE:
      return SocketIo::Next::kWaitWritable;
    case SSL_ERROR_ZERO_RETURN:
      return SocketIo::Next::kClosed;
    case SSL_ERROR_SYSCALL: {
      std::string queued = library_errors();
      if (!queued.empty()) {
        error_ = std::string(what) + ": " + queued;
      } else if (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK) {
        return SocketIo::Next::kWaitWritable;
      } else if (saved_errno == 0) {
        return SocketIo::Next::kClosed;  // the connection ended without TLS's close
      } else {
        error_ = std::string(what) + ": " + std::strerror(saved_errno);
      }
      return SocketIo::Next::kFailed;
    }
    default:
      error_ = std::string(what) + ": " + library_errors();
      return SocketIo::Next::kFailed;
  }
}

SocketIo::Next TlsSocket::handshake() {
  ERR_clear_error();
  errno = 0;
  int ret = SSL_do_handshake(ssl_);
  if (ret == 1) return SocketIo::Next::kGo;
  SocketIo::Next next = next_after(ret, "TLS handshake");
  if (next == SocketIo::Next::kClosed) {
    error_ = "the head closed the connection in the TLS handshake";
    return SocketIo::Next::kFailed;
  }
  if (next == SocketIo::Next::kFailed) error_ = detail::handshake_failure(error_, ssl_, to_);
  return next;
}

bool TlsSocket::verified() const { return !detail::head_unverified(ssl_); }

void TlsSocket::remember_session() { detail::remember_session(ssl_, to_); }

SocketIo TlsSocket::write(const char* data, size_t n) {
  ERR_clear_error();
  errno = 0;
  size_t written = 0;
  int ret = SSL_write_ex(ssl_, data, n, &written);
  if (ret == 1) return {written, SocketIo::Next::kGo};
  return {0, next_after(ret, "TLS write")};
}

SocketIo TlsSocket::send_file(int fd, off_t offset, size_t n) {
  ERR_clear_error();
  errno = 0;
  ossl_ssize_t sent = SSL_sendfile(ssl_, fd, offset, n, 0);
  if (sent >= 0) return {static_cast<size_t>(sent), SocketIo::Next::kGo};
  if (errno == EAGAIN || errno == EWOULDBLOCK) return {0, SocketIo::Next::kWaitWritable};
  return {0, next_after(static_cast<int>(sent), "TLS sendfile")};
}

SocketIo TlsSocket::read(char* data, size_t n) {
  ERR_clear_error();
  errno = 0;
  size_t got = 0;
  int ret = SSL_read_ex(ssl_, data, n, &got);
  if (ret == 1) return {got, SocketIo::Next::kGo};
  return {0, next_after(ret, "TLS read")};
}

bool TlsSocket::kernel_sends() const { return BIO_get_ktls_send(SSL_get_wbio(ssl_)); }

std::string TlsSocket::kernel_tls_unavailable() const {
  if (kernel_sends()) return "";
  std::ifstream file("/proc/sys/net/ipv4/tcp_available_ulp");
  std::string ulps((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  std::istringstream words(ulps);
  bool has_tls = false;
  for (std::string word; words >> word;) has_tls = has_tls || word == "tls";
  if (!has_tls) {
    return "the kernel's tls module is not loaded (/proc/sys/net/ipv4/tcp_available_ulp has no \"tls\"; "
           "`modprobe tls` adds it)";
  }
  return "the kernel did not take the " + cipher() + " session";
}

std::string TlsSocket::cipher() const {
  const char* cipher = SSL_get_cipher_name(ssl_);
  return std::string(SSL_get_version(ssl_)) + " " + (cipher ? cipher : "?");
}

}  // namespace ag::net
