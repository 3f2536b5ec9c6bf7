#include "net/raw_streams.h"

namespace ag::net::detail {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;

// A plain connection after its 101: the owner reads the socket itself.
class PlainRawStream final : public RawStream {
 public:
  explicit PlainRawStream(tcp::socket socket) : socket_(std::move(socket)) {
    boost::system::error_code ec;
    socket_.non_blocking(true, ec);
  }
  tcp::socket& socket() override { return socket_; }
  bool plain() const override { return true; }
  size_t read_some(char* data, size_t size, boost::system::error_code& ec) override {
    return socket_.read_some(asio::buffer(data, size), ec);
  }
  void close() override {
    boost::system::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
  }

 private:
  tcp::socket socket_;
};

// A TLS connection after its 101. Reads go through the TLS session on a non-blocking
// socket: would_block comes only once both the session and the socket are empty.
class TlsRawStream final : public RawStream {
 public:
  explicit TlsRawStream(ServerTlsStream stream) : stream_(std::move(stream)) {
    boost::system::error_code ec;
    socket().non_blocking(true, ec);
  }
  tcp::socket& socket() override { return beast::get_lowest_layer(stream_).socket(); }
  bool plain() const override { return false; }
  size_t read_some(char* data, size_t size, boost::system::error_code& ec) override {
    return stream_.read_some(asio::buffer(data, size), ec);
  }
  void close() override {
    boost::system::error_code ec;
    socket().shutdown(tcp::socket::shutdown_both, ec);
    socket().close(ec);
  }

 private:
  ServerTlsStream stream_;
};

}  // namespace

std::unique_ptr<RawStream> plain_raw_stream(tcp::socket socket) { return std::make_unique<PlainRawStream>(std::move(socket)); }

std::unique_ptr<RawStream> tls_raw_stream(ServerTlsStream stream) { return std::make_unique<TlsRawStream>(std::move(stream)); }

}  // namespace ag::net::detail
