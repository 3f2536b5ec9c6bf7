// TlsSocket: the client side of TLS driven straight on a connected, non-blocking TCP
// socket, for a one-way bulk stream (the worker's log stream). The caller waits for
// the socket itself and calls again; nothing here blocks or owns the socket.
//
// Where the kernel has its `tls` module, OpenSSL hands the record layer to the kernel
// once the handshake is done (kTLS), and files go out with SSL_sendfile without
// passing through this process; elsewhere records are encrypted here, and
// kernel_tls_unavailable() says why.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <memory>
#include <string>

#include "common/result.h"
#include "net/http_client.h"

typedef struct ssl_st SSL;  // NOLINT(modernize-use-using): OpenSSL's own spelling

namespace ag::net {

// What one non-blocking call on a socket came to: `bytes` moved, or none and what
// to wait for before calling again.
struct SocketIo {
  enum class Next { kGo, kWaitReadable, kWaitWritable, kClosed, kFailed };
  size_t bytes = 0;
  Next next = Next::kGo;
};

class TlsSocket {
 public:
  // The client side on `fd` (connected to `to`; not owned), verifying the head against
  // to.ca_pem and its host or address (unless to.tls_unverified), resuming a session
  // kept from an earlier connection. Errors: kInvalidArgument for a CA that does not
  // parse, kInternal when OpenSSL cannot make the session.
  static Result<std::unique_ptr<TlsSocket>> client(int fd, const Endpoint& to);
  ~TlsSocket();
  TlsSocket(const TlsSocket&) = delete;
  TlsSocket& operator=(const TlsSocket&) = delete;

  // Steps the handshake: kGo once it is done; kWaitReadable / kWaitWritable: call
  // again then; kFailed: error() says why (verified() false: the head's certificate
  // was refused, which no retry changes).
  SocketIo::Next handshake();
  bool verified() const;
  // Keeps the session for the next connection to the same head: call once the head
  // has answered (TLS 1.3 hands out its resumption ticket after the handshake).
  void remember_session();

  // Up to `n` bytes of `data` (kGo with bytes > 0), or a wait. After a wait, call again
  // with the same bytes (more may follow them).
  SocketIo write(const char* data, size_t n);
  // Up to `n` bytes of file `fd` from `offset` with SSL_sendfile: only while
  // kernel_sends(). bytes == 0 with kGo: the file ends before `offset`.
  SocketIo send_file(int fd, off_t offset, size_t n);
  // Up to `n` bytes into `data`; kClosed when the peer has closed the connection.
  SocketIo read(char* data, size_t n);

  // Whether the kernel encrypts what is sent (kTLS): known once the handshake is done.
  bool kernel_sends() const;
  // Why the kernel does not (for the log), empty when it does.
  std::string kernel_tls_unavailable() const;
  // The protocol and cipher agreed, e.g. "TLSv1.3 TLS_AES_256_GCM_SHA384".
  std::string cipher() const;
  // What the last kFailed was.
  const std::string& error() const { return error_; }

 private:
  TlsSocket(SSL* ssl, Endpoint to) : ssl_(ssl), to_(std::move(to)) {}
  // The outcome of an OpenSSL call that returned `ret`; fills error_ on failure.
  SocketIo::Next next_after(int ret, const char* what);

  SSL* ssl_;
  Endpoint to_;
  std::string error_;
};

}  // namespace ag::net
