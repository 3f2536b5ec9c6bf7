// The log stream inside TLS, both real ends on loopback: the worker's dial and stream
// (worker/log_stream.h) against the head's HttpServer with the cluster certificate and
// a LogStreamReader, as the head runs them. Records arrive byte for byte; a head that
// does not verify against the pinned CA is refused; either end closing is noticed by
// the other; the kernel's kTLS is used where it exists and said to be missing where not.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "api/log_frame.h"
#include "api/log_stream.h"
#include "head/logs/log_stream_reader.h"
#include "net/auth.h"
#include "net/http_server.h"
#include "net/tls.h"
#include "net/tls_socket.h"
#include "worker/log_stream.h"

namespace ag {
namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using tcp = asio::ip::tcp;

fs::path temp_dir(const std::string& name) {
  auto dir = fs::temp_directory_path() / ("ag-log-tls-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

uint16_t free_port() {
  asio::io_context io;
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  return acceptor.local_endpoint().port();
}

// The head's side: TLS with a fresh cluster CA, the log stream upgrade for one
// credential, and what its readers took.
class TlsHead {
 public:
  explicit TlsHead(asio::io_context& io) : io_(io), dir_(temp_dir("head")) {
    auto identity = net::ensure_cluster_tls(dir_.string(), {"127.0.0.1"});
    EXPECT_TRUE(identity.ok()) << identity.error().message;
    ca_pem_ = identity->ca_pem;
    net::ServerHandlers handlers;
    handlers.on_request = [](net::HttpRequest, net::Respond respond) { respond({404, "text/plain", "no"}); };
    handlers.check_upgrade = [](const net::HttpRequest& request) -> std::optional<net::HttpResponse> {
      if (net::bearer_token(request) == "node-credential") return std::nullopt;
      return net::HttpResponse{401, "application/json", R"({"error":"who are you"})"};
    };
    handlers.raw_protocol = api::kLogStreamProtocol;
    handlers.on_raw_upgrade = [this](net::RawUpgrade upgrade) { accept(std::move(upgrade)); };
    server_ = std::make_unique<net::HttpServer>(io_, handlers, 1 << 20);
    EXPECT_TRUE(server_->enable_tls(*identity, true).ok());
    port_ = free_port();
    Status listening = server_->listen("127.0.0.1", port_);
    EXPECT_TRUE(listening.ok()) << listening.error().message;
  }
  ~TlsHead() {
    if (reader_) reader_->close();
    server_->stop();
    fs::remove_all(dir_);
  }

  net::Endpoint endpoint() const { return {"127.0.0.1", port_, ca_pem_}; }
  std::map<std::string, std::string>& output() { return output_; }  // by task id, from offset 0
  std::vector<std::string>& messages() { return messages_; }
  const std::string& closed_because() const { return closed_because_; }
  bool plain_stream() const { return plain_stream_; }
  head::LogStreamReader* reader() { return reader_.get(); }

 private:
  void accept(net::RawUpgrade upgrade) {
    plain_stream_ = upgrade.stream->plain();
    reader_ = std::make_shared<head::LogStreamReader>(std::move(upgrade.stream), std::move(upgrade.leftover),
                                                      std::move(upgrade.held), piece_,
                                                      std::make_shared<head::SplicePipe>());
    using Verdict = head::LogStreamReader::Verdict;
    reader_->start(head::LogStreamReader::Handlers{
        [this](const api::LogFrameHeader& at, std::string_view bytes) {
          std::string& out = output_[at.task.job_id];
          EXPECT_EQ(static_cast<size_t>(at.offset), out.size());
          out.append(bytes);
          return Verdict::kTake;
        },
        [](const api::LogFrameHeader&, int, size_t) {
          ADD_FAILURE() << "a TLS stream cannot be spliced";
          return Verdict::kClose;
        },
        [this](std::string_view message) {
          messages_.emplace_back(message);
          return Verdict::kTake;
        },
        [this](const std::string& reason) { closed_because_ = reason; }});
  }

  asio::io_context& io_;
  fs::path dir_;
  std::string ca_pem_;
  uint16_t port_ = 0;
  std::unique_ptr<net::HttpServer> server_;
  std::vector<char> piece_ = std::vector<char>(1 << 20);
  std::shared_ptr<head::LogStreamReader> reader_;
  std::map<std::string, std::string> output_;
  std::vector<std::string> messages_;
  std::string closed_because_;
  bool plain_stream_ = true;
};

// Runs `io` until `done()` or 20 s.
template <class Done>
bool run_until(asio::io_context& io, Done done) {
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!done() && std::chrono::steady_clock::now() < until) io.run_one_for(std::chrono::milliseconds(50));
  return done();
}

Result<std::shared_ptr<worker::LogStream>> dial(asio::io_context& io, const net::Endpoint& head,
                                                const std::string& credential = "node-credential") {
  std::optional<Result<std::shared_ptr<worker::LogStream>>> outcome;
  worker::dial_log_stream(io, head, "127.0.0.1", credential,
                          [&](Result<std::shared_ptr<worker::LogStream>> result) { outcome = std::move(result); });
  if (!run_until(io, [&] { return outcome.has_value(); })) return Error{ErrorCode::kInternal, "the dial never ended"};
  return std::move(*outcome);
}

TEST(LogStreamTlsTest, RecordsCrossTheTlsStreamByteForByte) {
  auto dir = temp_dir("task");
  std::string content;
  for (int i = 0; content.size() < (9u << 20); ++i) content += "line " + std::to_string(i) + " of a task's output\n";
  std::ofstream(dir / "out", std::ios::binary) << content;
  asio::io_context io;
  TlsHead head(io);
  auto stream = dial(io, head.endpoint());
  ASSERT_TRUE(stream.ok()) << stream.error().message;
  // Three records, the middle one larger than the worker's held piece, with messages
  // between them: they keep their order.
  const int64_t sizes[] = {1000, 5 << 20, static_cast<int64_t>(content.size()) - 1000 - (5 << 20)};
  int64_t offset = 0;
  for (int64_t size : sizes) {
    ASSERT_TRUE((*stream)->send_file({api::TaskKey{"job_1", 0, 1}, offset}, (dir / "out").string(), size).ok());
    (*stream)->send_message(R"({"type":"after","offset":)" + std::to_string(offset + size) + "}");
    offset += size;
  }
  ASSERT_TRUE(run_until(io, [&] { return head.messages().size() == 3; }));
  EXPECT_FALSE(head.plain_stream());
  EXPECT_EQ(head.output()["job_1"].size(), content.size());
  EXPECT_TRUE(head.output()["job_1"] == content);
  EXPECT_EQ(head.messages()[2], R"({"type":"after","offset":)" + std::to_string(content.size()) + "}");
  EXPECT_FALSE((*stream)->busy());
  // The worker closing is seen by the head as the end of its stream.
  (*stream)->close();
  ASSERT_TRUE(run_until(io, [&] { return !head.closed_because().empty(); }));
  EXPECT_EQ(head.closed_because(), "closed by the worker");
  fs::remove_all(dir);
}

TEST(LogStreamTlsTest, AHeadThatDoesNotVerifyAgainstThePinnedCaIsRefused) {
  asio::io_context io;
  TlsHead head(io);
  auto other_dir = temp_dir("other-ca");
  auto other = net::ensure_cluster_tls(other_dir.string(), {"127.0.0.1"});
  ASSERT_TRUE(other.ok());
  net::Endpoint pinned_elsewhere = head.endpoint();
  pinned_elsewhere.ca_pem = other->ca_pem;
  auto stream = dial(io, pinned_elsewhere);
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.error().code, ErrorCode::kPermissionDenied);
  EXPECT_NE(stream.error().message.find("does not verify against the pinned cluster CA"), std::string::npos)
      << stream.error().message;
  fs::remove_all(other_dir);
}

TEST(LogStreamTlsTest, TheHeadsRefusalComesThroughTls) {
  asio::io_context io;
  TlsHead head(io);
  auto stream = dial(io, head.endpoint(), "a-wrong-credential");
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.error().code, ErrorCode::kUnauthenticated);
  EXPECT_NE(stream.error().message.find("HTTP 401 {\"error\":\"who are you\"}"), std::string::npos)
      << stream.error().message;
}

TEST(LogStreamTlsTest, TheHeadClosingIsNoticedWithoutAWrite) {
  asio::io_context io;
  TlsHead head(io);
  auto stream = dial(io, head.endpoint());
  ASSERT_TRUE(stream.ok()) << stream.error().message;
  std::string reason;
  (*stream)->on_failed([&](const std::string& why) { reason = why; });
  (*stream)->send_message(R"({"type":"hello"})");
  ASSERT_TRUE(run_until(io, [&] { return head.messages().size() == 1; }));
  head.reader()->close();
  ASSERT_TRUE(run_until(io, [&] { return !reason.empty(); }));
  EXPECT_EQ(reason, "closed by the head");
}

// kTLS where the kernel has its tls module; elsewhere the reason, naming the module.
TEST(LogStreamTlsTest, KernelTlsIsUsedWhereTheKernelHasItAndItsAbsenceExplained) {
  asio::io_context io;
  TlsHead head(io);
  std::thread head_thread([&] { io.run(); });
  asio::io_context client_io;
  tcp::socket socket(client_io);
  socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), head.endpoint().port));
  auto tls = net::TlsSocket::client(socket.native_handle(), head.endpoint());
  ASSERT_TRUE(tls.ok()) << tls.error().message;
  net::SocketIo::Next next = net::SocketIo::Next::kGo;  // the socket blocks: one call
  while ((next = (*tls)->handshake()) == net::SocketIo::Next::kWaitReadable || next == net::SocketIo::Next::kWaitWritable) {
  }
  ASSERT_EQ(next, net::SocketIo::Next::kGo) << (*tls)->error();
  std::ifstream ulp_file("/proc/sys/net/ipv4/tcp_available_ulp");
  std::string ulps((std::istreambuf_iterator<char>(ulp_file)), std::istreambuf_iterator<char>());
  if (ulps.find("tls") == std::string::npos) {
    EXPECT_FALSE((*tls)->kernel_sends());
    EXPECT_NE((*tls)->kernel_tls_unavailable().find("the kernel's tls module is not loaded"), std::string::npos)
        << (*tls)->kernel_tls_unavailable();
  } else {
    EXPECT_EQ((*tls)->kernel_sends(), (*tls)->kernel_tls_unavailable().empty()) << (*tls)->kernel_tls_unavailable();
  }
  EXPECT_NE((*tls)->cipher().find("TLSv1.3"), std::string::npos) << (*tls)->cipher();
  tls->reset();
  socket.close();
  io.stop();
  head_thread.join();
}

}  // namespace
}  // namespace ag
