// Private to the acquirer client: opens connections to the acquirer. DNS (its deadline enforced by not
// waiting, since getaddrinfo cannot be interrupted), TCP connect, and for https the TLS handshake with
// SNI and the certificate checked against the host. Every failure is a TransportResult that says no
// request byte was written.
//
// Not thread-safe: Open runs on the client's strand, the one the dialer was given.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ssl/context.hpp>
#include <cstdint>
#include <memory>
#include <optional>

#include "charge_outbox/acquirer/http_acquirer_client.hpp"
#include "connection.hpp"
#include "origin.hpp"

namespace charge_outbox::acquirer::detail {

class Dialer {
 public:
  // Loads the trusted certificates for an https origin. Throws config::ConfigError if it cannot.
  Dialer(const Strand& strand, const Origin& origin, const AcquirerClientConfig& config);
  Dialer(const Dialer&) = delete;
  Dialer& operator=(const Dialer&) = delete;

  // A connected (and for https, handshaken) connection, or the failure; within connect_timeout and
  // `deadline`, whichever comes first.
  struct Opened {
    std::shared_ptr<Connection> connection;
    TransportResult failure;
  };
  boost::asio::awaitable<Opened> Open(SteadyClock::time_point deadline);

  // TCP connections made, TLS handshakes that failed after them included.
  std::uint64_t connections_opened() const { return connections_opened_; }

 private:
  void SetUpTls();

  Strand strand_;
  const Origin& origin_;
  const AcquirerClientConfig& config_;
  std::optional<boost::asio::ssl::context> tls_context_;
  std::uint64_t connections_opened_ = 0;
};

}  // namespace charge_outbox::acquirer::detail
