// Private to the acquirer client: one request and its response on one open connection, plain or TLS.
// The write and the read share one deadline; where they stop is classified for the evidence rules
// (a failed write may still have delivered the request, so nothing after the first byte is "not sent").
// Knows nothing of the pool or of how the connection was opened.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cstddef>

#include "connection.hpp"

namespace charge_outbox::acquirer::detail {

using HttpRequest = boost::beast::http::request<boost::beast::http::string_body>;

struct Exchanged {
  TransportResult result;  // kResponse with the response, or where the exchange stopped
  bool reusable = false;   // kResponse only: keep-alive, nothing read past the response
};

// Writes `request` and reads the response (at most `max_response_bytes` of body) before `deadline`.
// `reused` is copied into the result. The caller keeps `connection` and `request` alive until the
// awaitable completes, and closes a connection that is not reusable.
boost::asio::awaitable<Exchanged> Exchange(Connection& connection, HttpRequest& request,
                                           SteadyClock::time_point deadline, std::size_t max_response_bytes,
                                           bool reused);

}  // namespace charge_outbox::acquirer::detail
