// FaultProxy: a loopback TCP proxy in front of one upstream (PostgreSQL, a Kafka broker, the acquirer),
// whose behaviour a test switches while traffic flows, to produce the network faults a process cannot
// produce on itself:
//
//   Pass()          forward both ways
//   Delay(ms)       forward, each chunk held `ms` first (both directions)
//   BlackHole()     stop forwarding and stop reading: peers see a connection that neither answers nor
//                   closes (their writes fill the socket buffers, then block), like a partitioned link.
//                   New connections are accepted and hang the same way. Pass() heals it: what was
//                   written meanwhile arrives, in order, as TCP would deliver it after the partition.
//                   A side that closes its end meanwhile (FIN or RST) has the other end reset, as the
//                   other side's keepalives would end it over a real partition (a client that gives up
//                   on a black-holed PostgreSQL ends its server session, and the session's locks).
//   Reset()         every open connection is reset (RST, both sides); new ones are reset on accept
//   Refuse()        the port stops listening and open connections are reset: a connect is refused, as
//                   when the upstream's process is gone. Any other mode listens again, on the same port.
//
// It runs on a thread of its own; every method is thread-safe. No root, no iptables.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace charge_outbox::testing {

class FaultProxy {
 public:
  enum class Mode { kPass, kDelay, kBlackHole, kReset, kRefuse };

  // Listens on 127.0.0.1:`listen_port` (0: any free port) and forwards to upstream_host:upstream_port.
  FaultProxy(std::string upstream_host, std::uint16_t upstream_port, std::uint16_t listen_port = 0);
  ~FaultProxy();
  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;

  std::uint16_t port() const;

  void Pass();
  void Delay(std::chrono::milliseconds delay);
  void BlackHole();
  void Reset();
  void Refuse();
  Mode mode() const;

  // Connections accepted so far, and those open now.
  std::uint64_t accepted() const;
  std::uint64_t open() const;

 private:
  void Switch(Mode mode, std::chrono::milliseconds delay);
  struct State;
  std::shared_ptr<State> state_;
};

// The host and port of a URI such as "postgresql://user@host:port/db" (PgTestDatabase::url()), and the
// same URI with them replaced: a daemon's DATABASE_URL through a FaultProxy in front of that server.
struct Endpoint {
  std::string host;
  std::uint16_t port = 0;
};
Endpoint UriEndpoint(const std::string& uri);
std::string WithEndpoint(const std::string& uri, const Endpoint& endpoint);

}  // namespace charge_outbox::testing
