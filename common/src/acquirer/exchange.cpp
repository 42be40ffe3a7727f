#include "exchange.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>

namespace charge_outbox::acquirer::detail {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using boost::system::error_code;

constexpr std::uint32_t kMaxResponseHeaderBytes = 16 * 1024;

bool IsHttpParseError(const error_code& ec) {
  return ec.category() == http::make_error_code(http::error::bad_status).category();
}

TransportStatus ReadFailure(const error_code& ec) {
  if (ec == beast::error::timeout) return TransportStatus::kResponseTimedOut;
  if (ec == http::error::end_of_stream || ec == http::error::partial_message || ec == http::error::short_read) {
    return TransportStatus::kConnectionDropped;
  }
  // Too large, or not HTTP: bytes came back, but not an answer we can read.
  if (IsHttpParseError(ec)) return TransportStatus::kResponseMalformed;
  // eof, reset, aborted, TLS stream_truncated, ...: the connection died under us after the write.
  return TransportStatus::kConnectionDropped;
}

template <class Stream>
asio::awaitable<Exchanged> ExchangeOn(Stream& stream, Connection& connection, HttpRequest& request,
                                      std::size_t max_response_bytes, bool reused) {
  Exchanged exchanged;
  const auto [write_ec, written] = co_await http::async_write(stream, request, asio::as_tuple(asio::use_awaitable));
  if (write_ec) {
    // Conservative: a failed write may have delivered enough for the acquirer to act (see classifier).
    const auto status =
        write_ec == beast::error::timeout ? TransportStatus::kSendTimedOut : TransportStatus::kWriteFailed;
    exchanged.result = Failure(status, "writing the request: " + write_ec.message(), reused);
    co_return exchanged;
  }
  http::response_parser<http::string_body> parser;
  parser.body_limit(max_response_bytes);
  parser.header_limit(kMaxResponseHeaderBytes);
  const auto [read_ec, read] =
      co_await http::async_read(stream, connection.buffer, parser, asio::as_tuple(asio::use_awaitable));
  if (read_ec) {
    const auto status = ReadFailure(read_ec);
    exchanged.result = Failure(status,
                               (status == TransportStatus::kResponseTimedOut
                                    ? std::string("no response before the deadline")
                                    : "reading the response: " + read_ec.message()),
                               reused);
    co_return exchanged;
  }
  auto message = parser.release();
  exchanged.reusable = message.keep_alive() && connection.buffer.size() == 0;
  connection.Tcp().expires_never();

  auto& result = exchanged.result;
  result.status = TransportStatus::kResponse;
  result.reused_connection = reused;
  HttpResponse response;
  response.status = static_cast<int>(message.result_int());
  for (const auto& field : message) {
    response.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  }
  response.body = std::move(message.body());
  result.response = std::move(response);
  co_return exchanged;
}

}  // namespace

// Not a coroutine: it picks the stream and hands back that exchange's awaitable, so a call costs one
// coroutine frame, as when this was written inline in the client.
asio::awaitable<Exchanged> Exchange(Connection& connection, HttpRequest& request, SteadyClock::time_point deadline,
                                    std::size_t max_response_bytes, bool reused) {
  connection.Tcp().expires_at(deadline);
  if (connection.tls) return ExchangeOn(*connection.tls, connection, request, max_response_bytes, reused);
  return ExchangeOn(*connection.plain, connection, request, max_response_bytes, reused);
}

}  // namespace charge_outbox::acquirer::detail
