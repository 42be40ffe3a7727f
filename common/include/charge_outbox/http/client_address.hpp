// Client address: who a request comes from, for the per-client defences (the failed-authentication
// budget, the refusal pacing, the share of the server per client). Directly connected, it is the TCP
// peer. Behind a proxy whose address is in TrustedProxies, it is the rightmost X-Forwarded-For hop that is
// not itself a trusted proxy: the hop the last trusted proxy saw, which no client can forge (anything a
// client sends is to the left of it). A header from a peer that is not trusted is never read.
#pragma once

#include <boost/asio/ip/address.hpp>
#include <boost/beast/http/fields.hpp>

#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace charge_outbox::http {

// An address block: "10.0.0.0/8", "fd00::/8", or a bare address (a /32 or /128).
struct Cidr {
  boost::asio::ip::address network;  // with the host bits cleared
  unsigned prefix_length = 0;

  bool Contains(const boost::asio::ip::address& address) const;
};

// nullopt for anything but an IP address with an optional /prefix in range.
std::optional<Cidr> ParseCidr(std::string_view text);

// The proxies whose X-Forwarded-For is believed. Empty (the default): none, every client is its TCP
// peer. Immutable after construction, so it is shared by every thread without locking.
class TrustedProxies {
 public:
  TrustedProxies() = default;
  explicit TrustedProxies(std::vector<Cidr> blocks);

  // "10.0.0.0/8, fd00::/8": comma-separated CIDRs, spaces allowed; empty text is the empty list.
  // nullopt, and the offending entry in `bad_entry`, if one is not a CIDR.
  static std::optional<TrustedProxies> Parse(std::string_view text, std::string* bad_entry = nullptr);

  bool empty() const { return blocks_.empty(); }
  // An IPv4-mapped IPv6 peer counts as its IPv4 address.
  bool Contains(const boost::asio::ip::address& address) const;

 private:
  std::vector<Cidr> blocks_;
};

// The X-Forwarded-For hops believed at most; a longer chain is cut off at the last one walked.
inline constexpr std::size_t kMaxForwardedHops = 32;

// The request's client address (see the banner). Walks every X-Forwarded-For field, last field and last
// hop first; a hop in `trusted` is skipped. A hop that is not an IP address (a port, a name, "unknown",
// garbage) ends the walk: the answer is then the last trusted hop believed, at worst the peer itself, so
// a malformed header can only make a request count against its proxy, never against someone else.
boost::asio::ip::address ClientAddress(const boost::asio::ip::address& peer, const boost::beast::http::fields& headers,
                                       const TrustedProxies& trusted);

// Requests in flight per client, capped: behind a proxy that keeps its connections open for many
// clients, connections per client mean nothing, so the share of the server one client may hold is
// counted in requests being read, handled or held instead. Thread-safe.
class InFlightLimit {
 public:
  // 0: no limit (Enter always succeeds, and nothing is counted).
  explicit InFlightLimit(std::size_t per_client) : per_client_(per_client) {}

  // Held while a request is in flight; releases its slot when destroyed.
  class Slot {
   public:
    Slot() = default;
    Slot(Slot&& other) noexcept : limit_(other.limit_), client_(std::move(other.client_)) { other.limit_ = nullptr; }
    Slot& operator=(Slot&&) = delete;
    Slot(const Slot&) = delete;
    ~Slot();

   private:
    friend class InFlightLimit;
    Slot(InFlightLimit* limit, std::string client) : limit_(limit), client_(std::move(client)) {}
    InFlightLimit* limit_ = nullptr;
    std::string client_;
  };

  // A slot for `client` (a ClientKey), or nullopt when it already has per_client requests in flight.
  std::optional<Slot> Enter(const std::string& client);
  std::size_t InFlight(const std::string& client) const;

 private:
  void Leave(const std::string& client);

  const std::size_t per_client_;
  mutable std::mutex mutex_;
  std::map<std::string, std::size_t, std::less<>> in_flight_;
};

}  // namespace charge_outbox::http
