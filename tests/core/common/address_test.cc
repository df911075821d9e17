// Address parsing and local interface queries. Touches only loopback.
#include "common/address.h"

#include <gtest/gtest.h>

#include <string>

namespace rayx {
namespace address_test {  // this file's own (unit tests compile in batches)

TEST(ParseHostPort, ParsesHostAndPort) {
  auto r = ParseHostPort("10.0.0.1:6380");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->host, "10.0.0.1");
  EXPECT_EQ(r->port, 6380);
  EXPECT_EQ(r->ToString(), "10.0.0.1:6380");
  EXPECT_EQ(r->ZmqEndpoint(), "tcp://10.0.0.1:6380");
}

TEST(ParseHostPort, AcceptsPortBounds) {
  auto low = ParseHostPort("h:1");
  ASSERT_TRUE(low.ok()) << low.status();
  EXPECT_EQ(low->port, 1);
  auto high = ParseHostPort("h:65535");
  ASSERT_TRUE(high.ok()) << high.status();
  EXPECT_EQ(high->port, 65535);
}

TEST(ParseHostPort, UsesDefaultPortWhenOmitted) {
  auto r = ParseHostPort("headnode", 6380);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->host, "headnode");
  EXPECT_EQ(r->port, 6380);
}

TEST(ParseHostPort, ExplicitPortOverridesDefault) {
  auto r = ParseHostPort("h:7000", 6380);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->port, 7000);
}

void ExpectBad(const std::string& text, const std::string& what, uint16_t default_port = 0) {
  auto r = ParseHostPort(text, default_port);
  ASSERT_FALSE(r.ok()) << "accepted '" << text << "'";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find(what), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("HOST:PORT"), std::string::npos) << r.status();
}

TEST(ParseHostPort, RejectsMissingPortWithoutDefault) { ExpectBad("headnode", "missing ':PORT'"); }

TEST(ParseHostPort, RejectsPortZero) { ExpectBad("h:0", "1 to 65535"); }

TEST(ParseHostPort, RejectsPortAbove65535) {
  ExpectBad("h:70000", "1 to 65535");
  ExpectBad("h:65536", "1 to 65535");
  ExpectBad("h:4294967297", "1 to 65535");
}

TEST(ParseHostPort, RejectsNonNumericPort) {
  ExpectBad("h:http", "1 to 65535");
  ExpectBad("h:80a", "1 to 65535");
  ExpectBad("h:-1", "1 to 65535");
  ExpectBad("h:+80", "1 to 65535");
  ExpectBad("h:", "1 to 65535");
  ExpectBad("h: 80", "1 to 65535");
}

TEST(ParseHostPort, RejectsEmptyHost) { ExpectBad(":6380", "empty host"); }

TEST(ParseHostPort, RejectsEmptyText) {
  ExpectBad("", "empty");
  ExpectBad("", "empty", 6380);
}

TEST(ParseHostPort, ErrorQuotesTheInput) { ExpectBad("oops:99999", "'oops:99999'"); }

TEST(ParseHostPort, ErrorQuotesLongInputCutShort) {
  auto r = ParseHostPort(std::string(100'000, 'h') + ":0");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'hhhh"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("...'"), std::string::npos) << r.status();
  EXPECT_LT(r.status().message().size(), 400u);
}

TEST(ResolveIpv4, ReturnsDottedAddressUnchanged) {
  auto r = ResolveIpv4("127.0.0.1");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, "127.0.0.1");
}

TEST(ResolveIpv4, ResolvesLocalhostToLoopback) {
  auto r = ResolveIpv4("localhost");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rfind("127.", 0), 0u) << *r;
}

TEST(LocalAddressToward, LoopbackIsReachedFromLoopback) {
  auto r = LocalAddressToward("127.0.0.1");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, "127.0.0.1");
}

TEST(LocalAddressToward, RejectsNonIpv4Text) {
  auto r = LocalAddressToward("not-an-ip");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("not-an-ip"), std::string::npos);
}

TEST(IsLocalAddress, LoopbackAndWildcardAreLocal) {
  EXPECT_TRUE(IsLocalAddress("127.0.0.1"));
  EXPECT_TRUE(IsLocalAddress("127.1.2.3"));
  EXPECT_TRUE(IsLocalAddress("localhost"));
  EXPECT_TRUE(IsLocalAddress("0.0.0.0"));
}

TEST(IsLocalAddress, OwnInterfaceAddressIsLocal) {
  EXPECT_TRUE(IsLocalAddress(DefaultNodeIp())) << DefaultNodeIp();
}

TEST(IsLocalAddress, ForeignAddressIsNotLocal) {
  // 192.0.2.0/24 is TEST-NET-1, never assigned to a real interface.
  EXPECT_FALSE(IsLocalAddress("192.0.2.123"));
  EXPECT_FALSE(IsLocalAddress(""));
  EXPECT_FALSE(IsLocalAddress("garbage"));
}

TEST(DefaultNodeIp, IsADottedIpv4Address) {
  std::string ip = DefaultNodeIp();
  auto r = ResolveIpv4(ip);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, ip);
}

}  // namespace
}  // namespace rayx
