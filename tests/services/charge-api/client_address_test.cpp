// The client address behind a trusted proxy (common/include/charge_outbox/http/client_address.hpp): CIDR
// parsing, the rightmost X-Forwarded-For hop that is not a trusted proxy, a header from an untrusted peer
// ignored, malformed values falling back to the last trusted hop, and the in-flight cap per client.
#include "charge_outbox/http/client_address.hpp"

#include <gtest/gtest.h>

#include <boost/asio/ip/address.hpp>
#include <boost/beast/http/fields.hpp>

#include <string>
#include <vector>

namespace charge_outbox::http {
namespace {

using boost::asio::ip::make_address;

TrustedProxies Proxies(std::string_view text) {
  auto parsed = TrustedProxies::Parse(text);
  EXPECT_TRUE(parsed.has_value()) << text;
  return parsed.value_or(TrustedProxies{});
}

std::string Client(std::string_view peer, const std::vector<std::string>& forwarded_for, std::string_view trusted) {
  boost::beast::http::fields headers;
  for (const auto& value : forwarded_for) headers.insert("X-Forwarded-For", value);
  return ClientAddress(make_address(std::string(peer)), headers, Proxies(trusted)).to_string();
}

TEST(ClientAddressTest, ParsesCidrsAndClearsTheHostBits) {
  const auto block = ParseCidr(" 10.1.2.3/8 ");
  ASSERT_TRUE(block.has_value());
  EXPECT_EQ(block->network.to_string(), "10.0.0.0");
  EXPECT_EQ(block->prefix_length, 8u);
  EXPECT_TRUE(block->Contains(make_address("10.200.0.1")));
  EXPECT_FALSE(block->Contains(make_address("11.0.0.1")));
  EXPECT_TRUE(block->Contains(make_address("::ffff:10.9.9.9"))) << "an IPv4-mapped peer is its IPv4 address";
  EXPECT_FALSE(block->Contains(make_address("fd00::1")));
  EXPECT_EQ(ParseCidr("fd00::1/8")->network.to_string(), "fd00::");
  EXPECT_TRUE(ParseCidr("fd00::/8")->Contains(make_address("fdff::7")));
  EXPECT_EQ(ParseCidr("192.0.2.7")->prefix_length, 32u);
  EXPECT_EQ(ParseCidr("2001:db8::1")->prefix_length, 128u);
  EXPECT_EQ(ParseCidr("0.0.0.0/0")->prefix_length, 0u);
  for (const char* bad : {"", "10.0.0.0/33", "fd00::/129", "10.0.0.0/", "10.0.0.0/8x", "10.0.0.0/-1", "ingress",
                          "10.0.0/8", "[fd00::]/8", "fe80::1%eth0/64", "10.0.0.0/8/8"}) {
    EXPECT_FALSE(ParseCidr(bad).has_value()) << bad;
  }
}

TEST(ClientAddressTest, ParsesAListAndNamesTheBadEntry) {
  EXPECT_TRUE(Proxies("").empty());
  EXPECT_TRUE(Proxies("  ").empty());
  const auto proxies = Proxies("10.0.0.0/8, fd00::/8,192.168.1.1");
  EXPECT_TRUE(proxies.Contains(make_address("10.3.4.5")));
  EXPECT_TRUE(proxies.Contains(make_address("fd12::1")));
  EXPECT_TRUE(proxies.Contains(make_address("192.168.1.1")));
  EXPECT_FALSE(proxies.Contains(make_address("192.168.1.2")));
  std::string bad;
  EXPECT_FALSE(TrustedProxies::Parse("10.0.0.0/8, nginx, fd00::/8", &bad).has_value());
  EXPECT_EQ(bad, "nginx");
  EXPECT_FALSE(TrustedProxies::Parse("10.0.0.0/8,", &bad).has_value()) << "an empty entry is a typo";
}

TEST(ClientAddressTest, BehindATrustedProxyTheClientIsTheRightmostUntrustedHop) {
  EXPECT_EQ(Client("10.0.0.5", {"203.0.113.7"}, "10.0.0.0/8"), "203.0.113.7");
  // What the client sent itself is to the left of what the proxy saw: never believed.
  EXPECT_EQ(Client("10.0.0.5", {"198.51.100.1, 203.0.113.7"}, "10.0.0.0/8"), "203.0.113.7");
  // A chain of trusted proxies (a load balancer, then the ingress) is walked through.
  EXPECT_EQ(Client("10.0.0.5", {"198.51.100.1, 203.0.113.7, 10.0.9.9"}, "10.0.0.0/8"), "203.0.113.7");
  // Several header fields are one list, in order.
  EXPECT_EQ(Client("10.0.0.5", {"198.51.100.1", "203.0.113.7, 10.0.9.9"}, "10.0.0.0/8"), "203.0.113.7");
  EXPECT_EQ(Client("10.0.0.5", {"2001:db8::7"}, "10.0.0.0/8"), "2001:db8::7");
  EXPECT_EQ(Client("10.0.0.5", {"[2001:db8::7]"}, "10.0.0.0/8"), "2001:db8::7");
  EXPECT_EQ(Client("10.0.0.5", {"::ffff:203.0.113.7"}, "10.0.0.0/8"), "203.0.113.7");
  EXPECT_EQ(Client("::ffff:10.0.0.5", {"203.0.113.7"}, "10.0.0.0/8"), "203.0.113.7");
  // Every hop trusted: the request began in the cluster, at the leftmost.
  EXPECT_EQ(Client("10.0.0.5", {"10.0.0.1, 10.0.0.2"}, "10.0.0.0/8"), "10.0.0.1");
  // No header: the proxy itself.
  EXPECT_EQ(Client("10.0.0.5", {}, "10.0.0.0/8"), "10.0.0.5");
}

TEST(ClientAddressTest, AnUntrustedPeersHeaderIsNeverRead) {
  EXPECT_EQ(Client("203.0.113.7", {"198.51.100.1"}, "10.0.0.0/8"), "203.0.113.7");
  EXPECT_EQ(Client("203.0.113.7", {"198.51.100.1"}, ""), "203.0.113.7") << "no proxies: none trusted";
  EXPECT_EQ(Client("10.0.0.5", {"198.51.100.1"}, ""), "10.0.0.5");
}

TEST(ClientAddressTest, AMalformedHopFallsBackToTheLastTrustedOne) {
  for (const char* bad : {"unknown", "203.0.113.7:4711", "garbage", "", " , ", "fe80::1%eth0", "1.2.3.4.5",
                          "203.0.113.7 198.51.100.1", "[2001:db8::7]:443"}) {
    EXPECT_EQ(Client("10.0.0.5", {bad}, "10.0.0.0/8"), "10.0.0.5") << bad;
  }
  EXPECT_EQ(Client("10.0.0.5", {"203.0.113.7, junk, 10.0.0.9"}, "10.0.0.0/8"), "10.0.0.9");
  // Junk left of the rightmost untrusted hop is never reached.
  EXPECT_EQ(Client("10.0.0.5", {"junk, 203.0.113.7"}, "10.0.0.0/8"), "203.0.113.7");
  EXPECT_EQ(Client("10.0.0.5", {std::string(20'000, ',') + "203.0.113.7"}, "10.0.0.0/8"), "203.0.113.7");
}

TEST(ClientAddressTest, AChainLongerThanTheHopLimitStopsAtTheLastTrustedHop) {
  std::string chain = "203.0.113.7";
  for (std::size_t i = 0; i < kMaxForwardedHops; ++i) chain += ", 10.0.0." + std::to_string(i + 1);
  // Walked from the right: the last hop believed is the leftmost of the trusted ones within the limit.
  EXPECT_EQ(Client("10.0.0.250", {chain}, "10.0.0.0/8"), "10.0.0.1");
  chain.erase(0, chain.find(',') + 2);
  EXPECT_EQ(Client("10.0.0.250", {"203.0.113.7, " + chain.substr(chain.find(',') + 2)}, "10.0.0.0/8"), "203.0.113.7")
      << "within the limit the client is found";
}

TEST(ClientAddressTest, InFlightLimitCapsEachClientAlone) {
  InFlightLimit limit(2);
  auto a1 = limit.Enter("a");
  auto a2 = limit.Enter("a");
  ASSERT_TRUE(a1.has_value());
  ASSERT_TRUE(a2.has_value());
  EXPECT_FALSE(limit.Enter("a").has_value());
  EXPECT_TRUE(limit.Enter("b").has_value()) << "another client is not touched";
  EXPECT_EQ(limit.InFlight("a"), 2u);
  a1.reset();
  EXPECT_EQ(limit.InFlight("a"), 1u);
  EXPECT_TRUE(limit.Enter("a").has_value());
  a2.reset();
  EXPECT_EQ(limit.InFlight("a"), 0u);
  InFlightLimit none(0);
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(none.Enter("a").has_value());
}

}  // namespace
}  // namespace charge_outbox::http
