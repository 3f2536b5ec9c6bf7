// interface_for_address: which interface holds the node's address (for
// GLOO_SOCKET_IFNAME and friends), --network-interface, and the refusals that list
// what the machine has.
#include "worker/network_interface.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace ag::worker {
namespace {

using ::testing::HasSubstr;

const std::vector<InterfaceAddress> kMachine = {
    {"lo", "127.0.0.1", 8, true},
    {"lo", "::1", 128, true},
    {"eth0", "10.0.0.2", 24, false},
    {"eth0", "fd00::2", 64, false},
    {"veth-b", "192.168.7.5", 24, false},
};

TEST(NetworkInterface, TheInterfaceWithTheAddress) {
  EXPECT_EQ(interface_for_address(kMachine, "10.0.0.2", "").value(), "eth0");
  EXPECT_EQ(interface_for_address(kMachine, "192.168.7.5", "").value(), "veth-b");
  EXPECT_EQ(interface_for_address(kMachine, "fd00::2", "").value(), "eth0");
  EXPECT_EQ(interface_for_address(kMachine, "127.0.0.1", "").value(), "lo");
}

TEST(NetworkInterface, LoopbackHoldsItsWholeNetwork) {
  // Test clusters give each worker its own 127.x address: all of them are lo's.
  EXPECT_EQ(interface_for_address(kMachine, "127.0.0.3", "").value(), "lo");
  // Another interface's network is not enough: the address must be its own.
  auto other = interface_for_address(kMachine, "10.0.0.9", "");
  ASSERT_FALSE(other.ok());
  EXPECT_THAT(other.error().message, HasSubstr("10.0.0.9 is on no interface of this machine"));
  EXPECT_THAT(other.error().message, HasSubstr("eth0 10.0.0.2/24"));
  EXPECT_THAT(other.error().message, HasSubstr("lo 127.0.0.1/8"));
}

TEST(NetworkInterface, TheChosenInterfaceMustExistAndHoldTheAddress) {
  EXPECT_EQ(interface_for_address(kMachine, "10.0.0.2", "eth0").value(), "eth0");
  auto missing = interface_for_address(kMachine, "10.0.0.2", "ib0");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.error().message, HasSubstr("--network-interface ib0: this machine has no such interface"));
  EXPECT_THAT(missing.error().message, HasSubstr("veth-b 192.168.7.5/24"));
  auto elsewhere = interface_for_address(kMachine, "10.0.0.2", "veth-b");
  ASSERT_FALSE(elsewhere.ok());
  EXPECT_THAT(elsewhere.error().message, HasSubstr("--network-interface veth-b does not hold the node address 10.0.0.2"));
}

TEST(NetworkInterface, ANodeAddressThatIsNoAddress) {
  auto bad = interface_for_address(kMachine, "head.example", "");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.error().message, HasSubstr("'head.example' is not an IP address"));
}

TEST(NetworkInterface, ThisMachineHasLoopback) {
  auto here = local_interface_addresses();
  auto lo = interface_for_address(here, "127.0.0.1", "");
  ASSERT_TRUE(lo.ok()) << lo.error().message;
  EXPECT_EQ(lo.value(), "lo");
}

}  // namespace
}  // namespace ag::worker
