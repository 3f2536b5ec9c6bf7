// The worker's log stream against a hand-made head on loopback: the upgrade, records
// byte for byte as the head reads them, a refusal, and a failure reported after the
// call that found it (so that the owner may let go of the stream there).
#include "worker/log_stream.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/write.hpp>
#include <filesystem>
#include <fstream>
#include <thread>

#include "api/log_frame.h"
#include "api/log_stream.h"

namespace ag::worker {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

// Accepts one connection on a thread of its own, reads the upgrade request and answers
// `reply`; then runs `after` on the socket.
class FakeHead {
 public:
  FakeHead(std::string reply, std::function<void(tcp::socket&)> after)
      : acceptor_(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {
    thread_ = std::thread([this, reply = std::move(reply), after = std::move(after)] {
      tcp::socket socket(io_);
      acceptor_.accept(socket);
      asio::read_until(socket, asio::dynamic_buffer(request_), "\r\n\r\n");
      asio::write(socket, asio::buffer(reply));
      if (after) after(socket);
    });
  }
  ~FakeHead() { thread_.join(); }
  net::Endpoint endpoint() const { return {"127.0.0.1", acceptor_.local_endpoint().port()}; }
  const std::string& request() const { return request_; }

 private:
  asio::io_context io_;
  tcp::acceptor acceptor_;
  std::thread thread_;
  std::string request_;
};

const std::string kAccept = "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: aethergrid-logs/1\r\n\r\n";

std::shared_ptr<LogStream> dial(asio::io_context& io, const net::Endpoint& head, Error* error = nullptr) {
  std::shared_ptr<LogStream> stream;
  bool done = false;
  dial_log_stream(io, head, "127.0.0.1", "node-credential", [&](Result<std::shared_ptr<LogStream>> result) {
    done = true;
    if (result.ok()) {
      stream = result.value();
    } else if (error) {
      *error = result.error();
    }
  });
  while (!done) io.run_one();
  return stream;
}

TEST(LogStreamTest, RecordsReachTheHeadByteForByteFromTheTasksFile) {
  auto file = std::filesystem::temp_directory_path() / ("ag-log-stream-test-" + std::to_string(::getpid()));
  std::string content;
  for (int i = 0; content.size() < (3u << 20); ++i) content += "line " + std::to_string(i) + "\n";
  std::ofstream(file, std::ios::binary) << content;
  const api::LogFrameHeader at{api::TaskKey{"job_1", 0, 2}, 1 << 20};
  const std::string expected = api::log_bytes_record_start(at, 1 << 20) + content.substr(1 << 20, 1 << 20) +
                               api::message_record(R"({"type":"heartbeat"})");
  std::string received;
  {
    FakeHead head(kAccept, [&](tcp::socket& socket) {
      received.resize(expected.size());
      asio::read(socket, asio::buffer(received));
    });
    asio::io_context io;
    auto stream = dial(io, head.endpoint());
    ASSERT_TRUE(stream);
    int drained = 0;
    stream->on_drained([&] { ++drained; });
    ASSERT_TRUE(stream->send_file(at, file.string(), 1 << 20));
    stream->send_message(R"({"type":"heartbeat"})");
    while (stream->busy()) io.run_one();
    EXPECT_GE(drained, 1);
    stream->close();
  }
  std::filesystem::remove(file);
  EXPECT_TRUE(received == expected);
}

TEST(LogStreamTest, TheUpgradeCarriesTheCredentialAndARefusalItsReason) {
  FakeHead head("HTTP/1.1 409 Conflict\r\nContent-Type: application/json\r\nContent-Length: 19\r\n\r\n"
                "{\"error\":\"not yet\"}",
                nullptr);
  asio::io_context io;
  Error error;
  EXPECT_FALSE(dial(io, head.endpoint(), &error));
  EXPECT_EQ(error.code, ErrorCode::kConflict);
  EXPECT_NE(error.message.find("HTTP 409 {\"error\":\"not yet\"}"), std::string::npos) << error.message;
  EXPECT_NE(head.request().find("GET /api/workers/logs HTTP/1.1"), std::string::npos);
  EXPECT_NE(head.request().find("Authorization: Bearer node-credential"), std::string::npos);
  EXPECT_NE(head.request().find("Upgrade: aethergrid-logs/1"), std::string::npos);
}

TEST(LogStreamTest, AFailureIsReportedAfterTheCallThatFoundItAndTheOwnerMayLetGoThere) {
  FakeHead head(kAccept, [](tcp::socket& socket) {
    socket.set_option(asio::socket_base::linger(true, 0));  // a reset
    socket.close();
  });
  asio::io_context io;
  auto stream = dial(io, head.endpoint());
  ASSERT_TRUE(stream);
  bool in_call = false;
  bool reported_in_call = false;
  std::string reason;
  stream->on_failed([&](const std::string& why) {
    reported_in_call = in_call;
    reason = why;
    stream.reset();  // what the agent does: the stream goes
  });
  const std::string message(64 << 10, 'x');
  for (int i = 0; i < 2000 && stream && reason.empty(); ++i) {
    in_call = true;
    stream->send_message(message);
    in_call = false;
    io.poll();
    if (i % 50 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_FALSE(reason.empty());
  EXPECT_FALSE(reported_in_call);
  EXPECT_FALSE(stream);
}

}  // namespace
}  // namespace ag::worker
