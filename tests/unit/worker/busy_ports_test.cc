// parse_busy_ports: the master-port range ports a node reports as held, from the text
// of /proc/net/tcp and tcp6.
#include "worker/busy_ports.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace ag::worker {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// 0x7332 = 29490, 0x7334 = 29492 (outside the range below), 0x735C = 29532,
// 0x735D = 29533, 0x7A9B = 31387.
constexpr const char* kTcp =
    "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    "   0: 0100007F:735C 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1 1\n"
    "   1: 00000000:7332 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2 1\n"
    "   2: 0200007F:735D 0300007F:9C40 01 00000000:00000000 00:00000000 00000000  1000        0 3 1\n"
    "   3: 0100007F:7A9B 0100007F:D431 06 00000000:00000000 03:00000F2B 00000000     0        0 0 3\n"
    "   4: 0100007F:735C 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4 1\n";

constexpr const char* kTcp6 =
    "  sl  local_address                         remote_address                        st tx_queue\n"
    "   0: 00000000000000000000000000000000:735D 00000000000000000000000000000000:0000 0A 00000000:00000000\n";

TEST(BusyPortsTest, ListeningAndConnectedSocketsInTheRangeAreBusy) {
  EXPECT_THAT(parse_busy_ports(kTcp, 29500, 31499), ElementsAre(29532, 29533));
}

TEST(BusyPortsTest, TimeWaitSocketsDoNotHoldAPort) {
  EXPECT_THAT(parse_busy_ports(kTcp, 31387, 31387), IsEmpty());
}

TEST(BusyPortsTest, RangeBoundsAreInclusive) {
  EXPECT_THAT(parse_busy_ports(kTcp, 29490, 29532), ElementsAre(29490, 29532));
}

TEST(BusyPortsTest, Ipv6LinesParseToo) { EXPECT_THAT(parse_busy_ports(kTcp6, 29500, 31499), ElementsAre(29533)); }

TEST(BusyPortsTest, MalformedLinesAreSkipped) {
  EXPECT_THAT(parse_busy_ports("header\nnot a socket line\n   0: 0100007F:ZZZZ 0:0 0A\n\n", 0, 65535), IsEmpty());
}

TEST(BusyPortsTest, APortListenedOnHereIsFoundAndFreedAfterClose) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  int port = ntohs(addr.sin_port);

  EXPECT_THAT(busy_ports(port, port), ElementsAre(port));
  ::close(fd);
  EXPECT_THAT(busy_ports(port, port), IsEmpty());
}

}  // namespace
}  // namespace ag::worker
