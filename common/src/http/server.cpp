#include "charge_outbox/http/server.hpp"

#include <spdlog/spdlog.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/json/serialize.hpp>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <future>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <vector>

namespace charge_outbox::http {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;

constexpr auto kNoThrow = asio::as_tuple(asio::use_awaitable);

// After Stop's deadline, cancelled handlers get this long to unwind before the pool is stopped.
constexpr std::chrono::milliseconds kForceCloseGrace{500};
// When we close after an error reply, we read and discard what the client is still sending for at most
// this long, so that closing with unread data does not turn into a TCP reset that destroys our reply
// before the client reads it.
constexpr std::chrono::milliseconds kLingerTimeout{1000};
constexpr std::size_t kLingerMaxBytes = 1024 * 1024;
constexpr std::size_t kReadChunk = 4096;

// Only touched on the connection's strand.
enum class Phase {
  kIdle,      // waiting for the first byte of a request: Stop closes the connection
  kBusy,      // reading, handling or writing a request: Stop lets it finish
};

struct Connection {
  explicit Connection(tcp::socket socket) : stream(std::move(socket)) {}
  beast::tcp_stream stream;
  asio::cancellation_signal cancel;
  Phase phase = Phase::kIdle;
  std::uint64_t id = 0;
  std::string client;  // ClientKey of the peer
};

bool IsHttpParseError(const boost::system::error_code& ec) {
  return ec.category() == boost::system::error_code(bhttp::error::bad_method).category();
}

// Logs an exception that ended a coroutine, except the cancellation Stop causes on purpose.
void LogCoroutineFailure(const char* what, const std::exception_ptr& error) {
  if (!error) return;
  try {
    std::rethrow_exception(error);
  } catch (const boost::system::system_error& e) {
    if (e.code() != boost::asio::error::operation_aborted) spdlog::error("http server: {}: {}", what, e.what());
  } catch (const std::exception& e) {
    spdlog::error("http server: {}: {}", what, e.what());
  }
}

bool IsClientGone(const boost::system::error_code& ec) {
  return ec == bhttp::error::end_of_stream || ec == bhttp::error::partial_message || ec == asio::error::eof ||
         ec == asio::error::connection_reset || ec == asio::error::operation_aborted ||
         ec == asio::error::broken_pipe || ec == asio::error::bad_descriptor || ec == beast::error::timeout;
}

void CloseSocket(beast::tcp_stream& stream) {
  boost::system::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  stream.socket().close(ignored);
}

}  // namespace

Response ProblemJson(Status status, std::string_view title, std::string_view detail,
                     const boost::json::object& extra) {
  boost::json::object body;
  body["type"] = "about:blank";
  body["title"] = title;
  body["status"] = static_cast<unsigned>(status);
  body["detail"] = detail;
  for (const auto& member : extra) body[member.key()] = member.value();
  Response response{status, 11};
  response.set(bhttp::field::content_type, "application/problem+json");
  response.body() = boost::json::serialize(body);
  return response;
}

namespace {

// A problem the server answers by itself, typed by ServerOptions::problem_type_prefix when it has one.
Response OwnProblem(const ServerOptions& options, Status status, std::string_view slug, std::string_view title,
                    std::string_view detail, boost::json::object extra = {}) {
  if (!options.problem_type_prefix.empty()) extra["type"] = options.problem_type_prefix + std::string(slug);
  return ProblemJson(status, title, detail, extra);
}

// A client behind a trusted proxy with ServerOptions::max_connections_per_client requests in flight.
Response TooManyInFlight(const ServerOptions& options) {
  auto response = OwnProblem(options, Status::too_many_requests, "too-many-requests-in-flight",
                             "Too many requests in flight",
                             "this client has " + std::to_string(options.max_connections_per_client) +
                                 " requests in flight, the most one client may have; retry once one is answered");
  response.set(bhttp::field::retry_after, "1");
  return response;
}

}  // namespace

Response JsonResponse(Status status, const boost::json::value& body) {
  return JsonResponse(status, boost::json::serialize(body));
}

Response JsonResponse(Status status, std::string serialized_body) {
  Response response{status, 11};
  response.set(bhttp::field::content_type, "application/json");
  response.body() = std::move(serialized_body);
  return response;
}

struct Server::Impl {
  Impl(ServerOptions server_options, PeerHandler request_handler)
      : options(std::move(server_options)),
        handler(std::move(request_handler)),
        in_flight(options.trusted_proxies.empty() ? 0 : options.max_connections_per_client),
        ioc(static_cast<int>(options.threads == 0 ? 1 : options.threads)),
        acceptor_strand(asio::make_strand(ioc)),
        acceptor(acceptor_strand),
        work(asio::make_work_guard(ioc)) {}

  asio::awaitable<void> AcceptLoop();
  asio::awaitable<void> RunSession(std::shared_ptr<Connection> connection);
  asio::awaitable<void> WriteAndClose(beast::tcp_stream& stream, Response response);
  // Holds a refusal to `client` (a ClientKey) as long as the pacer says; not while stopping.
  asio::awaitable<void> PaceRefusal(const std::string& client);
  void Unregister(std::uint64_t id);

  const ServerOptions options;
  const PeerHandler handler;
  // Behind a trusted proxy, the share of the server per client (ServerOptions::trusted_proxies).
  InFlightLimit in_flight;

  // Declared before the io_context so that they outlive it: destroying the io_context destroys the
  // suspended session coroutines, whose clean-up unregisters them here.
  mutable std::mutex mutex;
  std::condition_variable drained;
  std::unordered_map<std::uint64_t, std::shared_ptr<Connection>> connections;
  std::unordered_map<std::string, std::size_t> connections_per_client;
  std::uint64_t next_connection_id = 1;
  std::atomic<bool> stopping{false};

  std::mutex stop_mutex;  // serialises Start and Stop
  bool started = false;
  bool stopped = false;
  std::atomic<std::uint16_t> bound_port{0};
  std::vector<std::thread> pool;

  asio::io_context ioc;
  asio::strand<asio::io_context::executor_type> acceptor_strand;
  tcp::acceptor acceptor;
  asio::executor_work_guard<asio::io_context::executor_type> work;
};

void Server::Impl::Unregister(std::uint64_t id) {
  std::lock_guard lock(mutex);
  const auto found = connections.find(id);
  if (found == connections.end()) return;
  const auto client = connections_per_client.find(found->second->client);
  if (client != connections_per_client.end() && --client->second == 0) connections_per_client.erase(client);
  connections.erase(found);
  if (connections.empty()) drained.notify_all();
}

asio::awaitable<void> Server::Impl::AcceptLoop() {
  bool warned_full = false;
  for (;;) {
    auto [ec, socket] = co_await acceptor.async_accept(asio::make_strand(ioc), kNoThrow);
    if (ec) {
      if (stopping.load() || ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
      // Typically EMFILE: back off instead of spinning on an error that persists.
      spdlog::warn("http server: accept failed: {}; retrying in 100ms", ec.message());
      asio::steady_timer pause(acceptor_strand, std::chrono::milliseconds{100});
      co_await pause.async_wait(kNoThrow);
      continue;
    }
    boost::system::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    std::shared_ptr<Connection> connection;
    {
      std::lock_guard lock(mutex);
      if (stopping.load()) {
        socket.close(ignored);
        co_return;
      }
      if (connections.size() >= options.max_connections) {
        if (!warned_full) {
          spdlog::warn("http server: {} connections open, the configured maximum; closing new ones",
                       connections.size());
          warned_full = true;
        }
        socket.close(ignored);
        continue;
      }
      warned_full = false;
      boost::system::error_code peer_ec;
      auto client = ClientKey(socket.remote_endpoint(peer_ec).address());
      auto& from_client = connections_per_client[client];
      // A trusted proxy's connections carry many clients: each of those is held to its requests in flight.
      const bool proxy = options.trusted_proxies.Contains(socket.remote_endpoint(peer_ec).address());
      if (options.max_connections_per_client != 0 && from_client >= options.max_connections_per_client && !proxy) {
        socket.close(ignored);
        continue;
      }
      if (from_client != 0 && connections.size() + options.reserved_for_new_clients >= options.max_connections) {
        socket.close(ignored);  // only the reserved connections are left: a client that has none may take one
        continue;
      }
      ++from_client;
      connection = std::make_shared<Connection>(std::move(socket));
      connection->id = next_connection_id++;
      connection->client = std::move(client);
      connections.emplace(connection->id, connection);
    }
    auto executor = connection->stream.get_executor();
    auto slot = connection->cancel.slot();
    asio::co_spawn(executor, RunSession(std::move(connection)),
                   asio::bind_cancellation_slot(slot, [](const std::exception_ptr& error) {
                     LogCoroutineFailure("connection ended by an exception", error);
                   }));
  }
}

asio::awaitable<void> Server::Impl::PaceRefusal(const std::string& client) {
  if (!options.pacer || stopping.load()) co_return;
  const auto hold = options.pacer->HoldFor(client);
  if (hold <= std::chrono::milliseconds::zero()) co_return;
  // Stop cancels it through the session's cancellation slot, like any wait of a busy connection.
  asio::steady_timer timer(co_await asio::this_coro::executor, hold);
  co_await timer.async_wait(kNoThrow);
}

asio::awaitable<void> Server::Impl::WriteAndClose(beast::tcp_stream& stream, Response response) {
  response.keep_alive(false);
  response.prepare_payload();
  stream.expires_after(options.write_timeout);
  auto [write_ec, written] = co_await bhttp::async_write(stream, response, kNoThrow);
  if (!write_ec) {
    // Lingering close: see kLingerTimeout.
    boost::system::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream.expires_after(kLingerTimeout);
    // A vector, not an array: GCC 12 miscompiles array members of coroutine frames ("array used as
    // initializer"). This path only runs when a connection is being closed after an error.
    std::vector<char> sink(kReadChunk);
    std::size_t discarded = 0;
    while (discarded < kLingerMaxBytes) {
      auto [read_ec, n] = co_await stream.async_read_some(asio::buffer(sink), kNoThrow);
      if (read_ec) break;
      discarded += n;
    }
  }
  CloseSocket(stream);
}

asio::awaitable<void> Server::Impl::RunSession(std::shared_ptr<Connection> connection) {
  struct Unregisterer {
    Impl* impl;
    std::uint64_t id;
    ~Unregisterer() { impl->Unregister(id); }
  } unregister_on_exit{this, connection->id};

  auto& stream = connection->stream;
  boost::system::error_code peer_ec;
  const auto peer = stream.socket().remote_endpoint(peer_ec).address();
  beast::flat_buffer buffer(ReadBufferLimit(options));
  for (;;) {
    // Between requests. Stop's "close idle connections" pass runs on this strand too, so either it sees
    // kIdle and closes the socket, or it ran before and we see `stopping` here.
    if (stopping.load()) break;
    connection->phase = Phase::kIdle;
    if (buffer.size() == 0) {
      stream.expires_after(options.idle_timeout);
      auto [idle_ec, idle_bytes] = co_await stream.async_read_some(buffer.prepare(kReadChunk), kNoThrow);
      if (idle_ec) break;
      buffer.commit(idle_bytes);
    }
    connection->phase = Phase::kBusy;

    bhttp::request_parser<bhttp::string_body> parser;
    parser.header_limit(static_cast<std::uint32_t>(options.header_limit));
    parser.body_limit(options.body_limit);
    stream.expires_after(options.read_timeout);
    auto [header_ec, header_bytes] = co_await bhttp::async_read_header(stream, buffer, parser, kNoThrow);
    if (!header_ec && !parser.is_done()) {
      const auto expect = parser.get()[bhttp::field::expect];
      if (beast::iequals(expect, "100-continue")) {
        Response go_on{Status::continue_, parser.get().version()};
        auto [continue_ec, continue_bytes] = co_await bhttp::async_write(stream, go_on, kNoThrow);
        if (continue_ec) break;
      }
      auto [body_ec, body_bytes] = co_await bhttp::async_read(stream, buffer, parser, kNoThrow);
      header_ec = body_ec;
    }
    // Who sent it (the peer; behind a trusted proxy, the client the proxy names) and that client's place
    // among its requests in flight, held until the answer is written. With none left the request is
    // answered at once, never held: holding it would hold the proxy's connection for the client.
    const auto client = parser.is_header_done() ? ClientAddress(peer, parser.get(), options.trusted_proxies) : peer;
    const auto client_key = ClientKey(client);
    const auto in_flight_slot = in_flight.Enter(client_key);
    if (header_ec) {
      // The reply is built before the co_await: GCC 12 cannot keep some temporaries of a co_await
      // expression in the coroutine frame ("array used as initializer").
      std::optional<Response> problem;
      if (header_ec == bhttp::error::body_limit) {
        boost::json::object extra;
        extra["limit"] = options.body_limit;
        problem = OwnProblem(options, Status::payload_too_large, "body-too-large", "Request body too large",
                             "the body exceeds the limit of " + std::to_string(options.body_limit) + " bytes",
                             extra);
      } else if (header_ec == bhttp::error::header_limit) {
        problem = OwnProblem(options, Status::request_header_fields_too_large, "header-too-large",
                             "Request header too large",
                             "the header exceeds the limit of " + std::to_string(options.header_limit) + " bytes");
      } else if (header_ec == bhttp::error::buffer_overflow) {
        // Only a line that never ends fills the buffer (the header has its own limit): a chunk's size line.
        problem = OwnProblem(options, Status::bad_request, "malformed-request", "Malformed HTTP request",
                             "a line of the request (a chunk's size line) does not end within " +
                                 std::to_string(ReadBufferLimit(options)) + " bytes");
      } else if (!IsClientGone(header_ec) && IsHttpParseError(header_ec)) {
        problem = OwnProblem(options, Status::bad_request, "malformed-request", "Malformed HTTP request",
                             "the request could not be parsed: " + header_ec.message());
      }
      if (problem.has_value()) {
        if (in_flight_slot) co_await PaceRefusal(client_key);
        co_await WriteAndClose(stream, std::move(*problem));
      }
      break;
    }

    Request request = parser.release();
    const bool client_keep_alive = request.keep_alive();
    const unsigned version = request.version();
    Reply reply;
    if (!in_flight_slot) reply = Reply{TooManyInFlight(options)};
    try {
      if (in_flight_slot) reply = co_await handler(std::move(request), client);
    } catch (const boost::system::system_error& e) {
      if (e.code() == asio::error::operation_aborted && stopping.load()) break;  // cancelled by Stop
      spdlog::error("http server: handler failed: {}", e.what());
      reply = Reply{OwnProblem(options, Status::internal_server_error, "internal", "Internal error",
                               "the request could not be handled; it is safe to retry")};
    } catch (const std::exception& e) {
      spdlog::error("http server: handler failed: {}", e.what());
      reply = Reply{OwnProblem(options, Status::internal_server_error, "internal", "Internal error",
                               "the request could not be handled; it is safe to retry")};
    }
    if (reply.close_without_answer) break;
    if (reply.anonymous_refusal) co_await PaceRefusal(client_key);

    Response& response = reply.response;
    response.version(version);
    const bool keep_alive = client_keep_alive && response.keep_alive() && !stopping.load();
    response.keep_alive(keep_alive);
    response.prepare_payload();
    stream.expires_after(options.write_timeout);
    auto [write_ec, written] = co_await bhttp::async_write(stream, response, kNoThrow);
    if (write_ec || !keep_alive) break;
  }
  CloseSocket(stream);
}

std::size_t ReadBufferLimit(const ServerOptions& options) {
  return options.header_limit + options.body_limit + kReadBufferMargin;
}

std::string ClientKey(const asio::ip::address& peer) {
  if (peer.is_v4()) return peer.to_string();
  const auto v6 = peer.to_v6();
  if (v6.is_v4_mapped()) return asio::ip::make_address_v4(asio::ip::v4_mapped, v6).to_string();
  auto bytes = v6.to_bytes();
  std::fill(bytes.begin() + 8, bytes.end(), 0);
  return asio::ip::address_v6(bytes).to_string() + "/64";
}

Server::Server(ServerOptions options, PeerHandler handler)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(handler))) {}

Server::Server(ServerOptions options, Handler handler)
    : Server(std::move(options), [handler = std::move(handler)](Request request, const asio::ip::address&) {
        return handler(std::move(request));
      }) {}

Server::~Server() { Stop(std::chrono::milliseconds{0}); }

std::uint16_t Server::Start() {
  std::lock_guard stop_lock(impl_->stop_mutex);
  auto& impl = *impl_;
  if (impl.started) return impl.bound_port.load();
  const tcp::endpoint endpoint(asio::ip::make_address(impl.options.address), impl.options.port);
  impl.acceptor.open(endpoint.protocol());
  impl.acceptor.set_option(asio::socket_base::reuse_address(true));
  impl.acceptor.bind(endpoint);
  impl.acceptor.listen(asio::socket_base::max_listen_connections);
  impl.bound_port.store(impl.acceptor.local_endpoint().port());
  asio::co_spawn(impl.acceptor_strand, impl.AcceptLoop(), [](const std::exception_ptr& error) {
    LogCoroutineFailure("accept loop ended by an exception", error);
  });
  const auto threads = impl.options.threads == 0 ? std::size_t{1} : impl.options.threads;
  for (std::size_t i = 0; i < threads; ++i) {
    impl.pool.emplace_back([&impl] { impl.ioc.run(); });
  }
  impl.started = true;
  return impl.bound_port.load();
}

void Server::Stop(std::chrono::milliseconds drain_deadline) {
  std::lock_guard stop_lock(impl_->stop_mutex);
  auto& impl = *impl_;
  if (!impl.started || impl.stopped) return;
  const auto deadline = std::chrono::steady_clock::now() + drain_deadline;
  impl.stopping.store(true);
  // Waited for, so that the port refuses connections from here on (a posted close could otherwise be
  // dropped by ioc.stop() below).
  std::promise<void> acceptor_closed;
  asio::post(impl.acceptor_strand, [&impl, &acceptor_closed] {
    boost::system::error_code ignored;
    impl.acceptor.close(ignored);
    acceptor_closed.set_value();
  });
  acceptor_closed.get_future().wait();

  std::unique_lock lock(impl.mutex);
  for (const auto& [id, connection] : impl.connections) {
    asio::post(connection->stream.get_executor(), [connection = connection] {
      if (connection->phase == Phase::kIdle) CloseSocket(connection->stream);
    });
  }
  if (!impl.drained.wait_until(lock, deadline, [&impl] { return impl.connections.empty(); })) {
    spdlog::warn("http server: {} connection(s) still busy at the stop deadline; cancelling them",
                 impl.connections.size());
    for (const auto& [id, connection] : impl.connections) {
      asio::post(connection->stream.get_executor(), [connection = connection] {
        connection->cancel.emit(asio::cancellation_type::terminal);
        CloseSocket(connection->stream);
      });
    }
    impl.drained.wait_for(lock, kForceCloseGrace, [&impl] { return impl.connections.empty(); });
  }
  lock.unlock();

  impl.work.reset();
  impl.ioc.stop();
  for (auto& thread : impl.pool) thread.join();
  impl.pool.clear();
  impl.stopped = true;
}

std::uint16_t Server::port() const { return impl_->bound_port.load(); }

std::size_t Server::OpenConnections() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->connections.size();
}

}  // namespace charge_outbox::http
