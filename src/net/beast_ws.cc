#include "net/beast_ws.h"

#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket/ssl.hpp>

namespace ag::net::detail {

template <class NextLayer>
BeastWs<NextLayer>::BeastWs(Stream stream, std::string remote)
    : ws_(std::move(stream)), remote_(std::move(remote)) {
  // Handshake timeouts are the caller's; once open, Beast's suggested settings ping
  // idle peers so that a vanished one is noticed.
  beast::get_lowest_layer(ws_).expires_never();
  ws_.set_option(websocket::stream_base::timeout::suggested(beast::role_type::server));
  ws_.read_message_max(64 * 1024 * 1024);
  // One frame per message, masked (the client's side) in 256 KiB pieces: Beast's
  // defaults (4 KiB frames) cost the head a read per 4 KiB of task output.
  ws_.auto_fragment(false);
  ws_.write_buffer_bytes(256 * 1024);
}

template <class NextLayer>
void BeastWs<NextLayer>::start(MessageHandler on_message, CloseHandler on_close) {
  on_message_ = std::move(on_message);
  on_close_ = std::move(on_close);
  do_read();
}

template <class NextLayer>
void BeastWs<NextLayer>::do_read() {
  reading_ = true;
  ws_.async_read(read_buffer_, [self = this->shared_from_this()](beast::error_code ec, size_t) {
    self->reading_ = false;
    if (ec) {
      self->fail(ec == websocket::error::closed ? "closed by peer" : ec.message());
      return;
    }
    std::string data = beast::buffers_to_string(self->read_buffer_.data());
    self->read_buffer_.consume(self->read_buffer_.size());
    bool binary = self->ws_.got_binary();
    if (self->on_message_) self->on_message_(std::move(data), binary);
    if (!self->closed_ && !self->paused_) self->do_read();
  });
}

template <class NextLayer>
void BeastWs<NextLayer>::resume_reading() {
  paused_ = false;
  if (!reading_ && !closed_ && on_close_) do_read();
}

template <class NextLayer>
void BeastWs<NextLayer>::send(std::string data, bool binary) {
  if (closed_ || closing_) return;
  queued_bytes_ += data.size();
  outbox_.emplace_back(std::move(data), binary);
  if (!writing_) do_write();
}

template <class NextLayer>
void BeastWs<NextLayer>::do_write() {
  if (outbox_.empty() || closed_) {
    writing_ = false;
    if (closing_) close_now();
    return;
  }
  writing_ = true;
  ws_.binary(outbox_.front().second);
  ws_.async_write(boost::asio::buffer(outbox_.front().first),
                  [self = this->shared_from_this()](beast::error_code ec, size_t) {
                    if (ec) {
                      self->fail(ec.message());
                      return;
                    }
                    // Closed meanwhile: the outbox is gone with it.
                    if (self->closed_) return;
                    self->queued_bytes_ -= self->outbox_.front().first.size();
                    self->outbox_.pop_front();
                    // Whatever the sender adds here joins the outbox behind this write.
                    if (self->on_drained_ && self->queued_bytes_ <= self->drain_low_water_) self->on_drained_();
                    self->do_write();
                  });
}

template <class NextLayer>
void BeastWs<NextLayer>::close() {
  if (closed_) return;
  // Frames already queued (an error message saying why) go out first, unless the peer
  // is not reading them.
  if (writing_ && queued_bytes_ <= kMaxFlushOnCloseBytes) {
    closing_ = true;
    return;
  }
  close_now();
}

template <class NextLayer>
void BeastWs<NextLayer>::close_now() {
  if (closed_) return;
  beast::error_code ec;
  beast::get_lowest_layer(ws_).socket().shutdown(boost::asio::ip::tcp::socket::shutdown_both, ec);
  beast::get_lowest_layer(ws_).socket().close(ec);
  fail("closed locally");
}

template <class NextLayer>
void BeastWs<NextLayer>::fail(const std::string& reason) {
  if (closed_) return;
  closed_ = true;
  outbox_.clear();
  queued_bytes_ = 0;
  beast::error_code ec;
  beast::get_lowest_layer(ws_).socket().close(ec);
  auto on_close = std::move(on_close_);
  on_message_ = nullptr;
  on_drained_ = nullptr;
  if (on_close) on_close(reason);
}

template class BeastWs<beast::tcp_stream>;
template class BeastWs<beast::ssl_stream<beast::tcp_stream>>;

}  // namespace ag::net::detail
