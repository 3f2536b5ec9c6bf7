// `ag port-forward JOB [--task-index N] [LOCAL:]REMOTE`: listens on 127.0.0.1:LOCAL and
// carries each connection made to it, through the head, to 127.0.0.1:REMOTE on the
// node of the job's task N (api/exec_protocol.h: a session per connection). Several
// connections run at once; a connection the remote side refuses is said on stderr and
// closed. Ctrl-C ends it.
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <csignal>
#include <deque>
#include <functional>
#include <iostream>

#include "api/exec_protocol.h"
#include "cli/api_client.h"
#include "cli/commands.h"
#include "cli/exec_dial.h"
#include "net/ws_client.h"

namespace ag::cli {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using api::ExecChannel;

struct Ports {
  int local = 0;
  int remote = 0;
};

// "REMOTE" or "LOCAL:REMOTE" (LOCAL empty or 0: any free port).
Result<Ports> parse_ports(const std::string& text) {
  const auto number = [](const std::string& s, int min) -> std::optional<int> {
    if (s.empty() || s.size() > 5 || s.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    const int n = std::stoi(s);
    if (n < min || n > 65535) return std::nullopt;
    return n;
  };
  const size_t colon = text.find(':');
  const std::string local = colon == std::string::npos ? text : text.substr(0, colon);
  const std::string remote = colon == std::string::npos ? text : text.substr(colon + 1);
  auto l = local.empty() && colon != std::string::npos ? std::optional<int>(0) : number(local, 0);
  auto r = number(remote, 1);
  if (!l || !r) {
    return invalid_argument("'" + text + "' is not [LOCAL:]REMOTE: ports are whole numbers from 1 to 65535 "
                            "(e.g. 8888, or 9000:8888 to listen on 9000 here; 0:8888 for any free local port)");
  }
  return Ports{*l, *r};
}

// One forwarded connection: the local socket and its session through the head. Bytes
// read from the socket go on while the session's queue is short; bytes for the socket
// queue up to a bound, past which the session is read no further.
class Forward : public std::enable_shared_from_this<Forward> {
 public:
  Forward(tcp::socket socket, std::string peer) : socket_(std::move(socket)), peer_(std::move(peer)) {}

  // `ended`: the job can no longer be reached (it ended, or access was taken away).
  void start(asio::io_context& io, const net::WsDialOptions& dial, std::function<void()> ended) {
    net::ws_dial(io, dial, [self = shared_from_this(), ended](Result<std::shared_ptr<net::WsConnection>> ws) {
      if (!ws.ok()) {
        std::cerr << "port-forward: connection from " << self->peer_ << ": " << ws.error().message << "\n";
        self->close_socket();
        const ErrorCode code = ws.error().code;
        if (code == ErrorCode::kConflict || code == ErrorCode::kNotFound || code == ErrorCode::kPermissionDenied) ended();
        return;
      }
      self->ws_ = ws.value();
      self->ws_->start([self](const std::string& data, bool binary) { self->from_head(data, binary); },
                       [self](const std::string&) { self->head_closed(); });
      self->read_local();
    });
  }

 private:
  void read_local() {
    buffer_.assign(1 + api::kExecChunkBytes, '\0');
    buffer_[0] = static_cast<char>(ExecChannel::kStdin);
    socket_.async_read_some(asio::buffer(buffer_.data() + 1, api::kExecChunkBytes),
                            [self = shared_from_this()](boost::system::error_code ec, size_t n) {
                              if (self->gone_) return;
                              if (ec) {
                                // All this side sends: the remote program sees the end.
                                return self->ws_->send(api::exec_frame(ExecChannel::kStdin, ""), true);
                              }
                              self->ws_->send(self->buffer_.substr(0, 1 + n), true);
                              if (self->ws_->queued_bytes() <= api::kExecHighWaterBytes) return self->read_local();
                              // Read on once the queue drains, once: the callback stays set and
                              // runs after every later write that leaves the queue short.
                              self->waiting_drain_ = true;
                              self->ws_->on_drained(api::kExecHighWaterBytes / 2, [self] {
                                if (!self->waiting_drain_) return;
                                self->waiting_drain_ = false;
                                self->read_local();
                              });
                            });
  }

  void from_head(const std::string& data, bool binary) {
    if (!binary || data.empty()) return;
    const auto channel = static_cast<ExecChannel>(data[0]);
    if (channel == ExecChannel::kStatus) {
      auto status = api::decode_exec_status(std::string_view(data).substr(1));
      if (status.ok() && !status.value().error.empty()) {
        std::cerr << "port-forward: connection from " << peer_ << ": " << status.value().error << "\n";
      }
      return;
    }
    if (channel != ExecChannel::kStdout || data.size() == 1) return;
    queued_ += data.size() - 1;
    to_local_.push_back(data.substr(1));
    if (queued_ > api::kExecHighWaterBytes) ws_->pause_reading();
    if (!writing_) write_local();
  }

  void write_local() {
    if (to_local_.empty()) {
      writing_ = false;
      if (head_gone_) close_socket();
      return;
    }
    writing_ = true;
    asio::async_write(socket_, asio::buffer(to_local_.front()),
                      [self = shared_from_this()](boost::system::error_code ec, size_t) {
                        if (ec) {  // the local program closed its end: the session goes too
                          self->gone_ = true;
                          self->to_local_.clear();
                          self->writing_ = false;
                          return self->ws_->close();
                        }
                        self->queued_ -= self->to_local_.front().size();
                        self->to_local_.pop_front();
                        if (self->queued_ <= api::kExecHighWaterBytes / 2) self->ws_->resume_reading();
                        self->write_local();
                      });
  }

  // The session ended (the remote program closed its end, or the head went): what is
  // queued for the socket goes first.
  void head_closed() {
    head_gone_ = true;
    if (!writing_) close_socket();
  }

  void close_socket() {
    gone_ = true;
    boost::system::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

  tcp::socket socket_;
  std::string peer_;
  std::shared_ptr<net::WsConnection> ws_;
  std::string buffer_;
  std::deque<std::string> to_local_;
  size_t queued_ = 0;
  bool writing_ = false, head_gone_ = false, gone_ = false;
  bool waiting_drain_ = false;  // reading the socket waits for the session's queue
};

void accept_next(tcp::acceptor& acceptor, asio::io_context& io, const net::WsDialOptions& dial,
                 const std::function<void()>& ended) {
  acceptor.async_accept([&acceptor, &io, &dial, &ended](boost::system::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted) return;
    if (ec) {
      // Out of descriptors, say: said, and tried again in a moment rather than at once.
      std::cerr << "port-forward: cannot accept a connection: " << ec.message() << "\n";
      auto pause = std::make_shared<asio::steady_timer>(io, std::chrono::milliseconds(200));
      return pause->async_wait([pause, &acceptor, &io, &dial, &ended](boost::system::error_code) {
        accept_next(acceptor, io, dial, ended);
      });
    }
    boost::system::error_code ignored;
    const auto peer = socket.remote_endpoint(ignored);
    const std::string from = peer.address().to_string() + ":" + std::to_string(peer.port());
    std::make_shared<Forward>(std::move(socket), from)->start(io, dial, ended);
    accept_next(acceptor, io, dial, ended);
  });
}

}  // namespace

int port_forward(const ConnectionOptions& options, const std::string& job_id, int task_index, const std::string& text) {
  auto ports = parse_ports(text);
  if (!ports.ok()) return usage_error(ports.error().message);
  auto conn = resolve_connection(options);
  if (!conn.ok()) return fail(conn.error());
  const std::string target = "/api/jobs/" + net::url_encode(job_id) + "/port-forward?task_index=" +
                             std::to_string(task_index) + "&port=" + std::to_string(ports.value().remote);
  // Asked first, without a session: a job that cannot be reached says so before
  // anything listens here.
  auto answer = call_answer(conn.value(), "GET", target);
  if (!answer.ok()) return fail(answer.error());
  if (answer.value().status != 426) return fail(answer_error(conn.value(), answer.value()));

  asio::io_context io;
  tcp::acceptor acceptor(io);
  const tcp::endpoint local(asio::ip::make_address_v4("127.0.0.1"), static_cast<unsigned short>(ports.value().local));
  boost::system::error_code ec;
  acceptor.open(local.protocol(), ec);
  if (!ec) acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor.bind(local, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec == asio::error::address_in_use) {
    return fail(Error{ErrorCode::kConflict, "local port " + std::to_string(ports.value().local) +
                                                " is in use on this machine; pick another: ag port-forward " + job_id +
                                                " OTHER:" + std::to_string(ports.value().remote) + " (0:" +
                                                std::to_string(ports.value().remote) + " takes any free one)"});
  }
  if (ec) {
    return fail(Error{ErrorCode::kUnavailable,
                      "cannot listen on 127.0.0.1:" + std::to_string(ports.value().local) + ": " + ec.message()});
  }
  const int bound = acceptor.local_endpoint().port();
  std::cout << "Forwarding http://127.0.0.1:" << bound << " to port " << ports.value().remote << " of job " << job_id
            << " (task " << task_index << "'s node); Ctrl-C ends it" << std::endl;
  const net::WsDialOptions dial = exec_dial(conn.value(), target);
  int code = 0;
  const std::function<void()> ended = [&] {
    code = 1;
    io.stop();
  };
  accept_next(acceptor, io, dial, ended);
  asio::signal_set ending(io, SIGINT, SIGTERM);
  ending.async_wait([&io](boost::system::error_code, int) { io.stop(); });
  io.run();
  return code;
}

}  // namespace ag::cli
