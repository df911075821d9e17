// PortReserver: rendezvous ports from below the ephemeral range, never twice while held.
#include "agent/port_reserver.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <set>

#include <gtest/gtest.h>

namespace rayx::worker {
namespace port_reserver_test {  // this file's own (unit tests compile in batches)

PortReserver::Options SmallRange() {
  PortReserver::Options o;
  o.first = 40000;
  o.last = 40003;
  o.hold_ms = 1000;
  return o;
}

TEST(PortReserver, HandsOutDistinctPortsWhileHeld) {
  ManualClock clock;
  PortReserver ports(SmallRange(), clock, [](uint16_t) { return true; });
  std::set<uint16_t> seen;
  for (int i = 0; i < 4; ++i) {
    auto port = ports.Reserve();
    ASSERT_TRUE(port.ok()) << port.status().ToString();
    EXPECT_GE(*port, 40000);
    EXPECT_LE(*port, 40003);
    EXPECT_TRUE(seen.insert(*port).second) << "port " << *port << " handed out twice";
  }
  auto none = ports.Reserve();
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("40000-40003"), std::string::npos)
      << none.status().ToString();
}

TEST(PortReserver, ReusesAPortOnlyAfterItsHoldEnds) {
  ManualClock clock;
  PortReserver ports(SmallRange(), clock, [](uint16_t) { return true; });
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(ports.Reserve().ok());
  clock.Advance(999);
  EXPECT_FALSE(ports.Reserve().ok());
  clock.Advance(1);
  EXPECT_TRUE(ports.Reserve().ok());
}

TEST(PortReserver, SkipsPortsSomeoneElseListensOn) {
  ManualClock clock;
  PortReserver ports(SmallRange(), clock, [](uint16_t p) { return p == 40002; });
  auto port = ports.Reserve();
  ASSERT_TRUE(port.ok());
  EXPECT_EQ(*port, 40002);
  EXPECT_FALSE(ports.Reserve().ok());
}

TEST(PortReserver, KernelRangeStaysBelowEphemeralPorts) {
  PortReserver::Options o = PortReserver::FromKernel();
  EXPECT_LE(o.first, o.last);
  EXPECT_GE(o.last - o.first + 1, 256);
}

TEST(PortReserver, BindProbeRefusesAPortWithAListener) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  auto probe = PortReserver::BindProbe("127.0.0.1");
  EXPECT_FALSE(probe(ntohs(addr.sin_port)));
  ::close(fd);
  EXPECT_TRUE(probe(ntohs(addr.sin_port)));
}

}  // namespace
}  // namespace rayx::worker
