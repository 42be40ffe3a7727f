// HTTP server: a Boost.Beast/Asio HTTP/1.1 server that every daemon reuses.
//
// The HTTP logic is a Handler, a function from Request to Reply. The server owns everything else:
// accepting, one coroutine per connection reading one request at a time (with timeouts, a body limit
// and a bounded read buffer), calling the handler, writing the reply, keep-alive, and a graceful Stop.
// Errors the server answers by itself (400 malformed, 413 too large, 431 header too large, 500 handler
// threw) are RFC 9457 problem+json, built with ProblemJson() like every handler error should be.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/status.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "charge_outbox/http/client_address.hpp"

namespace charge_outbox::http {

using Request = boost::beast::http::request<boost::beast::http::string_body>;
using Response = boost::beast::http::response<boost::beast::http::string_body>;
using Status = boost::beast::http::status;

struct Reply {
  Response response;
  // Close the connection without writing anything: a fault injector's "dropped connection".
  bool close_without_answer = false;
  // Refused before anyone was authenticated (no such route, a method not allowed, a missing or unknown
  // key): the answers a flood is made of, paced per client by ServerOptions::pacer.
  bool anonymous_refusal = false;
};

// Runs on the connection's strand, so a handler needs no locking for its own connection. It must not
// block the thread (the pool is small and shared by every connection): blocking work such as a database
// call is posted elsewhere and awaited. Whatever it awaits should be cancellable through Asio's
// cancellation slot (timers and sockets are), because Stop cancels handlers still running at its
// deadline. Content-Length, the HTTP version and the Connection header are set by the server.
// A handler that throws produces a 500 problem+json; the exception is logged.
using Handler = std::function<boost::asio::awaitable<Reply>(Request)>;
// The same, told the client's address (client_address.hpp: the TCP peer, or behind a trusted proxy the
// client it forwards for): what a per-client limit keys on.
using PeerHandler = std::function<boost::asio::awaitable<Reply>(Request, const boost::asio::ip::address& peer)>;

// Paces the answers that refuse a client nobody authenticated: the handler's replies marked
// anonymous_refusal and the server's own 400, 413 and 431. Holding such an answer costs a timer, not a
// thread, and it slows the flood itself: an HTTP/1.1 client sends its next request on a connection only
// after the answer, so a client's garbage can come no faster than the pace, however fast it can send.
class RefusalPacer {
 public:
  virtual ~RefusalPacer() = default;
  // How long to hold the next such answer to `client` (a ClientKey); zero: answer now. Called from any of
  // the server's threads at once.
  virtual std::chrono::milliseconds HoldFor(const std::string& client) = 0;
};

struct ServerOptions {
  std::string address = "127.0.0.1";
  std::uint16_t port = 0;  // 0: an ephemeral port, returned by Start()
  std::size_t threads = 1;
  std::size_t body_limit = 16 * 1024;
  std::size_t header_limit = 8 * 1024;
  // From the first byte of a request to its last: a client that trickles a request is cut off.
  std::chrono::milliseconds read_timeout{10'000};
  // How long a kept-alive connection may wait for its next request.
  std::chrono::milliseconds idle_timeout{60'000};
  std::chrono::milliseconds write_timeout{10'000};
  // Connections accepted beyond this are closed at once (the kernel backlog is not a queue we control).
  std::size_t max_connections = 10'000;
  // Of those, at most this many from one client (ClientKey: an IPv4 address, an IPv6 /64); 0: no limit.
  // One address trickling bodies must not hold every connection the server has.
  std::size_t max_connections_per_client = 0;
  // The last this many of max_connections go only to a client with no connection open: however many
  // clients fill the rest, a newcomer (the kubelet's probe, a scrape) still gets in. 0: none kept.
  std::size_t reserved_for_new_clients = 0;
  // Peers whose X-Forwarded-For names the client (ClientAddress); empty: none, the client is the peer.
  // A trusted proxy carries many clients on connections it keeps open, so its connections are not held to
  // max_connections_per_client; instead each client may have at most that many requests in flight (being
  // handled, or answered and held by the pacer), and one past it is answered 429 at once, unpaced.
  TrustedProxies trusted_proxies;
  // Null: refusals are answered at once.
  std::shared_ptr<RefusalPacer> pacer;
  // The `type` of the problems the server answers by itself is this followed by malformed-request (400),
  // body-too-large (413), header-too-large (431) or internal (500); empty: "about:blank".
  std::string problem_type_prefix;
};

// The most a connection's read buffer holds: header_limit + body_limit + kReadBufferMargin. The parser
// consumes a body as it arrives, so only an unfinished line (a header, a chunk's size line, which Boost
// 1.81 does not limit by itself) can fill it; a request that does is answered 400 and closed, so no
// request grows the server's memory past this bound per connection.
inline constexpr std::size_t kReadBufferMargin = 4096;
std::size_t ReadBufferLimit(const ServerOptions& options);

// Lifecycle: construct, Start() once, Stop() once (more calls are harmless). The destructor stops a
// running server with no drain time. Start, Stop and the accessors may be called from any thread except
// one of the server's own (a handler must never call Stop: it would wait for itself).
class Server {
 public:
  Server(ServerOptions options, Handler handler);
  Server(ServerOptions options, PeerHandler handler);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds, listens and starts the thread pool. Returns the bound port. Throws std::system_error if the
  // address cannot be bound (a start-up error).
  std::uint16_t Start();

  // Stops accepting, closes idle keep-alive connections, lets requests being read or handled finish
  // (their replies carry `Connection: close`) until `drain_deadline`, then cancels the handlers still
  // running and closes every connection, and joins the pool. Returns within about drain_deadline plus a
  // short fixed grace for cancelled handlers to unwind. Thread-safe; a second call waits for the first.
  void Stop(std::chrono::milliseconds drain_deadline);

  std::uint16_t port() const;
  // Connections open right now; for tests and metrics.
  std::size_t OpenConnections() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Who a per-client limit counts: an IPv4 address (an IPv4-mapped IPv6 one too), or an IPv6 /64, the
// block one host usually holds.
std::string ClientKey(const boost::asio::ip::address& peer);

// An RFC 9457 problem: {"type", "title", "status", "detail"} plus `extra` members (for example "field"
// naming a bad input, or "type" to replace the default "about:blank"), as application/problem+json.
Response ProblemJson(Status status, std::string_view title, std::string_view detail,
                     const boost::json::object& extra = {});

// A JSON body with Content-Type application/json.
Response JsonResponse(Status status, const boost::json::value& body);
Response JsonResponse(Status status, std::string serialized_body);

}  // namespace charge_outbox::http
