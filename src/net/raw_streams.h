// Internal to net/: the RawStream (http_server.h) of a connection after its 101, over
// plain TCP or over TLS.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/ssl.hpp>
#include <memory>

#include "net/http_server.h"

namespace ag::net::detail {

using ServerTlsStream = boost::beast::ssl_stream<boost::beast::tcp_stream>;

// The owner reads the socket itself.
std::unique_ptr<RawStream> plain_raw_stream(boost::asio::ip::tcp::socket socket);
// Reads go through the TLS session on a non-blocking socket: would_block comes only once
// both the session and the socket are empty.
std::unique_ptr<RawStream> tls_raw_stream(ServerTlsStream stream);

}  // namespace ag::net::detail
