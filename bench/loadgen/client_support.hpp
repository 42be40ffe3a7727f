// What the benchmark clients (loadgen, bench/flood's slow_clients) share: durations as flags take them,
// and sockets that send from a chosen loopback address.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace charge_outbox::bench {

// "10s", "500ms", "2m".
inline std::chrono::milliseconds ParseDuration(const std::string& text) {
  std::int64_t amount = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), amount);
  const std::string_view unit(ptr, static_cast<std::size_t>(text.data() + text.size() - ptr));
  if (ec != std::errc{} || amount < 0) throw std::invalid_argument("bad duration " + text);
  if (unit == "ms") return std::chrono::milliseconds{amount};
  if (unit == "s") return std::chrono::seconds{amount};
  if (unit == "m") return std::chrono::minutes{amount};
  throw std::invalid_argument("bad duration " + text + " (use ms, s or m)");
}

// Opens SOCKET (closing it first if open) bound to SOURCE, ready to connect to an endpoint of
// PROTOCOL. A second source address is a second client identity to a server that limits per client
// address; on Linux every address in 127.0.0.0/8 is local.
inline boost::system::error_code OpenFrom(boost::asio::ip::tcp::socket& socket, boost::asio::ip::tcp protocol,
                                          const boost::asio::ip::address& source) {
  boost::system::error_code ec;
  if (socket.is_open()) socket.close(ec);
  socket.open(protocol, ec);
  if (ec) return ec;
#ifdef IP_BIND_ADDRESS_NO_PORT
  // The port is picked at connect time, per destination, not at bind: a client that reconnects
  // thousands of times a second would otherwise run out of ports for its one source address.
  const int on = 1;
  ::setsockopt(socket.native_handle(), IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &on, sizeof on);
#endif
  socket.bind(boost::asio::ip::tcp::endpoint(source, 0), ec);
  return ec;
}

// The value at rank P (0 to 1) of SORTED, nearest rank; 0 when empty.
inline std::uint32_t Percentile(const std::vector<std::uint32_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  const auto rank = static_cast<std::size_t>(p * static_cast<double>(sorted.size() - 1) + 0.5);
  return sorted[std::min(rank, sorted.size() - 1)];
}

}  // namespace charge_outbox::bench
