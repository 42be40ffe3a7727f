// ClientRefusalPacer: how charge-api paces the answers it refuses to anonymous clients (no such route, a
// method not allowed, a missing or unknown key, the server's own 400/413/431). Per client (an IPv4
// address or an IPv6 /64) a burst is answered at once, then one answer per 1/rate, each held until its
// turn, for at most max_wait. A client that waits for its answers (HTTP/1.1 does) then refuses itself
// no faster than the rate, whatever its speed; a merchant's requests are never paced
// (docs/charge-api.md, "Hostile clients").
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

#include "charge_api_probe.hpp"
#include "charge_outbox/http/server.hpp"
#include "token_bucket.hpp"

namespace charge_outbox::charge_api {

struct RefusalPacing {
  TokenBucketRule rule{.rate = 200, .burst = 20'000};  // rate 0: off
  // A client's connections each wait their turn: up to max_connections_per_client / rate (1,000 / 200).
  std::chrono::milliseconds max_wait{5000};
  std::size_t clients = 100'000;  // tracked at most (LRU)
};

// Thread-safe.
class ClientRefusalPacer final : public http::RefusalPacer {
 public:
  ClientRefusalPacer(const RefusalPacing& pacing, ChargeApiProbe& probe);

  std::chrono::milliseconds HoldFor(const std::string& client) override;

 private:
  KeyedLimiter answers_;
  const std::chrono::milliseconds max_wait_;
  ChargeApiProbe& probe_;
};

}  // namespace charge_outbox::charge_api
