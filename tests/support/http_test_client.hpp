// A small synchronous HTTP/1.1 client for tests: one kept-alive connection, a timeout per exchange, and
// every failure reported as an error code rather than thrown, so a test can assert exactly how an
// exchange failed (closed without an answer, timed out, refused). Header-only so that any test target
// linking charge_outbox::test_support (which puts tests/support on the include path) can use it.
#pragma once

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace charge_outbox::testing {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpResult {
  // Empty when a response was read. Typical failures: beast::error::timeout (no complete answer in
  // time), http::error::end_of_stream (closed before any byte of an answer), connection_refused.
  boost::system::error_code error;
  boost::beast::http::response<boost::beast::http::string_body> response;

  bool ok() const { return !error; }
  unsigned status() const { return response.result_int(); }
  std::string header(boost::beast::string_view name) const { return std::string(response[name]); }
  // The body as JSON; throws (failing the test) if it is not.
  boost::json::value json() const {
    boost::system::error_code ec;
    auto value = boost::json::parse(response.body(), ec);
    if (ec) throw std::runtime_error("response body is not JSON (" + ec.message() + "): " + response.body());
    return value;
  }
};

// Not thread-safe: one client per thread. A failed exchange closes the connection; the next call opens
// a new one (connects() counts them, so a test can prove keep-alive reused a connection).
class HttpTestClient {
 public:
  explicit HttpTestClient(std::uint16_t port, std::string host = "127.0.0.1",
                          std::chrono::milliseconds timeout = std::chrono::seconds{10})
      : host_(std::move(host)), port_(port), timeout_(timeout), stream_(ioc_) {}

  void set_timeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }
  std::size_t connects() const { return connects_; }
  bool connected() const { return stream_.socket().is_open(); }
  void Close() {
    boost::system::error_code ignored;
    stream_.socket().shutdown(boost::asio::ip::tcp::socket::shutdown_both, ignored);
    stream_.socket().close(ignored);
    buffer_.clear();
  }

  HttpResult Send(boost::beast::http::verb method, const std::string& target, const std::string& body = {},
                  const HttpHeaders& headers = {}) {
    boost::beast::http::request<boost::beast::http::string_body> request{method, target, 11};
    request.set(boost::beast::http::field::host, host_);
    bool has_content_type = false;
    for (const auto& [name, value] : headers) {
      request.set(name, value);
      if (boost::beast::iequals(name, "content-type")) has_content_type = true;
    }
    if (!body.empty() && !has_content_type) request.set(boost::beast::http::field::content_type, "application/json");
    request.body() = body;
    if (!body.empty() || method == boost::beast::http::verb::post || method == boost::beast::http::verb::put) {
      request.prepare_payload();
    }
    HttpResult result;
    if (!EnsureConnected(result.error)) return result;
    stream_.expires_after(timeout_);
    boost::beast::http::async_write(stream_, request, [&](boost::system::error_code ec, std::size_t) {
      if (ec) {
        result.error = ec;
        return;
      }
      ReadResponse(result);
    });
    Run();
    Finish(result);
    return result;
  }

  HttpResult Get(const std::string& target, const HttpHeaders& headers = {}) {
    return Send(boost::beast::http::verb::get, target, {}, headers);
  }
  HttpResult Post(const std::string& target, const std::string& body, const HttpHeaders& headers = {}) {
    return Send(boost::beast::http::verb::post, target, body, headers);
  }
  HttpResult Put(const std::string& target, const std::string& body, const HttpHeaders& headers = {}) {
    return Send(boost::beast::http::verb::put, target, body, headers);
  }

  // Writes `bytes` as they are (a malformed or partial request) and reads one response, if any.
  HttpResult SendRaw(const std::string& bytes) {
    HttpResult result;
    if (!EnsureConnected(result.error)) return result;
    stream_.expires_after(timeout_);
    boost::asio::async_write(stream_, boost::asio::buffer(bytes), [&](boost::system::error_code ec, std::size_t) {
      if (ec) {
        result.error = ec;
        return;
      }
      ReadResponse(result);
    });
    Run();
    Finish(result);
    return result;
  }

  // Waits up to the timeout for the server to close the connection; true if it did (EOF or reset),
  // false if it was still open (or sent bytes) when the time ran out.
  bool WaitForServerClose() {
    boost::system::error_code error;
    if (!connected()) return true;
    char byte = 0;
    stream_.expires_after(timeout_);
    stream_.async_read_some(boost::asio::buffer(&byte, 1),
                            [&](boost::system::error_code ec, std::size_t) { error = ec; });
    Run();
    const bool closed = error == boost::asio::error::eof || error == boost::asio::error::connection_reset;
    Close();
    return closed;
  }

 private:
  // Starts reading one response into `result`. Beast's default limit (8 MB) is for untrusted peers; a test
  // reads its own servers, and the acquirer's ledger after a long chaos run is tens of megabytes.
  void ReadResponse(HttpResult& result) {
    constexpr std::uint64_t kMaxResponseBody = 1ull << 30;
    auto parser =
        std::make_shared<boost::beast::http::response_parser<boost::beast::http::string_body>>();
    parser->body_limit(kMaxResponseBody);
    boost::beast::http::async_read(stream_, buffer_, *parser,
                                   [&result, parser](boost::system::error_code read_ec, std::size_t) {
                                     result.error = read_ec;
                                     if (!read_ec) result.response = parser->release();
                                   });
  }

  bool EnsureConnected(boost::system::error_code& error) {
    if (connected()) return true;
    buffer_.clear();
    boost::asio::ip::tcp::resolver resolver(ioc_);
    const auto endpoints = resolver.resolve(host_, std::to_string(port_), error);
    if (error) return false;
    stream_.expires_after(timeout_);
    stream_.async_connect(endpoints, [&](boost::system::error_code ec, const auto&) { error = ec; });
    Run();
    if (error) {
      Close();
      return false;
    }
    ++connects_;
    return true;
  }

  void Run() {
    ioc_.restart();
    ioc_.run();
  }

  void Finish(const HttpResult& result) {
    if (result.error || !result.response.keep_alive()) Close();
  }

  std::string host_;
  std::uint16_t port_;
  std::chrono::milliseconds timeout_;
  boost::asio::io_context ioc_;
  boost::beast::tcp_stream stream_;
  boost::beast::flat_buffer buffer_;
  std::size_t connects_ = 0;
};

}  // namespace charge_outbox::testing
