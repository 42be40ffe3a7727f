// Private to the acquirer client: one connection to the acquirer, as the pool keeps it, the dialer
// opens it and an exchange uses it. Touched only on the client's strand.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <chrono>
#include <memory>
#include <string>

#include "charge_outbox/acquirer/classifier.hpp"

namespace charge_outbox::acquirer::detail {

using SteadyClock = std::chrono::steady_clock;
using Strand = boost::asio::strand<boost::asio::any_io_executor>;
using TlsStream = boost::beast::ssl_stream<boost::beast::tcp_stream>;

// Exactly one of plain/tls is set.
struct Connection {
  std::unique_ptr<boost::beast::tcp_stream> plain;
  std::unique_ptr<TlsStream> tls;
  boost::beast::flat_buffer buffer;  // bytes read past the last response; a reusable connection has none
  SteadyClock::time_point idle_since;

  boost::beast::tcp_stream& Tcp() { return tls ? tls->next_layer() : *plain; }
  // Shuts the socket down both ways and closes it; errors are of no use to anyone here.
  void Close();
};

// A transport result that is not a response.
TransportResult Failure(TransportStatus status, std::string detail, bool reused);

}  // namespace charge_outbox::acquirer::detail
