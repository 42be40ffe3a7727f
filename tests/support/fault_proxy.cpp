#include "fault_proxy.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/asio/write.hpp>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <set>
#include <stdexcept>
#include <utility>
#include <thread>

namespace charge_outbox::testing {

namespace asio = boost::asio;
using asio::ip::tcp;

struct FaultProxy::State : std::enable_shared_from_this<State> {
  struct Connection {
    explicit Connection(asio::io_context& io) : client(io), upstream(io) {}
    tcp::socket client;
    tcp::socket upstream;
  };

  State(std::string host, std::uint16_t upstream, std::uint16_t listen)
      : upstream_host(std::move(host)),
        upstream_port(upstream),
        acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), listen)),
        port(acceptor.local_endpoint().port()),
        changed(io, asio::steady_timer::time_point::max()),
        work(asio::make_work_guard(io)) {}

  // Everything below runs on the proxy's thread.
  asio::awaitable<void> Accept() {
    for (;;) {
      auto connection = std::make_shared<Connection>(io);
      const auto [ec] = co_await acceptor.async_accept(connection->client, asio::as_tuple(asio::use_awaitable));
      if (ec) co_return;  // closed
      ++accepted;
      asio::co_spawn(io, Serve(connection), asio::detached);
    }
  }

  asio::awaitable<void> Serve(std::shared_ptr<Connection> c) {
    live.insert(c);
    ++open;
    co_await WhileBlackHoled(*c);
    if (!c->client.is_open()) {  // the client gave up during the partition
      Forget(c);
      co_return;
    }
    if (mode == Mode::kReset) {
      Kill(*c);
    } else {
      tcp::resolver resolver(io);
      const auto [rec, endpoints] =
          co_await resolver.async_resolve(upstream_host, std::to_string(upstream_port), asio::as_tuple(asio::use_awaitable));
      bool connected = false;
      if (!rec) {
        const auto [cec, endpoint] = co_await asio::async_connect(c->upstream, endpoints, asio::as_tuple(asio::use_awaitable));
        connected = !cec;
      }
      if (connected) {
        // Each direction pumps on its own; the connection ends when both have.
        auto self = shared_from_this();
        auto done = std::make_shared<int>(0);
        auto finish = [this, self, c, done](std::exception_ptr) {
          if (++*done == 2) Forget(c);
        };
        asio::co_spawn(io, Pump(c, c->client, c->upstream), finish);
        asio::co_spawn(io, Pump(c, c->upstream, c->client), finish);
        co_return;
      }
      Kill(*c);
    }
    Forget(c);
  }

  asio::awaitable<void> Pump(std::shared_ptr<Connection> c, tcp::socket& from, tcp::socket& to) {
    std::array<char, 16 * 1024> buffer;
    for (;;) {
      co_await WhileBlackHoled(*c);
      const auto [rec, n] = co_await from.async_read_some(asio::buffer(buffer), asio::as_tuple(asio::use_awaitable));
      if (rec) break;
      // Read just before a partition began: held, and delivered in order once it heals.
      co_await WhileBlackHoled(*c);
      if (mode == Mode::kDelay) {
        asio::steady_timer hold(io, delay);
        co_await hold.async_wait(asio::as_tuple(asio::use_awaitable));
      }
      if (mode == Mode::kReset) break;
      const auto [wec, written] = co_await asio::async_write(to, asio::buffer(buffer.data(), n),
                                                             asio::as_tuple(asio::use_awaitable));
      if (wec) break;
    }
    Kill(*c);
  }

  // Returns when the partition heals, or when the connection was ended meanwhile (EndClosedDuringPartition).
  asio::awaitable<void> WhileBlackHoled(const Connection& c) {
    while (mode == Mode::kBlackHole && c.client.is_open()) {
      co_await changed.async_wait(asio::as_tuple(asio::use_awaitable));
    }
  }

  // Whether the peer of `s` ended the connection (its FIN or RST arrived), read from the kernel without
  // reading the socket: during a partition the bytes in front of a FIN stay unread.
  static bool PeerEnded(tcp::socket& s) {
    if (!s.is_open()) return false;
    tcp_info info{};
    socklen_t length = sizeof info;
    if (::getsockopt(s.native_handle(), IPPROTO_TCP, TCP_INFO, &info, &length) != 0) return false;
    return info.tcpi_state == TCP_CLOSE_WAIT || info.tcpi_state == TCP_CLOSE;
  }

  // During a partition, a side that gives up and closes its end has the other end closed too (RST): what
  // the other side's TCP keepalives or tcp_user_timeout would do over a real partition, only sooner. So a
  // client that abandons a black-holed PostgreSQL connection ends the server's session, as it would in
  // production once the server's keepalives fire, and the session's advisory locks go with it.
  asio::awaitable<void> EndClosedDuringPartition() {
    asio::steady_timer tick(io);
    for (;;) {
      tick.expires_after(std::chrono::milliseconds{50});
      const auto [ec] = co_await tick.async_wait(asio::as_tuple(asio::use_awaitable));
      if (ec) co_return;
      if (mode != Mode::kBlackHole) continue;
      bool ended = false;
      for (const auto& c : live) {
        if (PeerEnded(c->client) || PeerEnded(c->upstream)) {
          Kill(*c);
          ended = true;
        }
      }
      // Wake the ended connections' pumps, which then finish; the others wait on.
      if (ended) changed.cancel();
    }
  }

  void Set(Mode m, std::chrono::milliseconds d) {
    const bool was_refusing = mode == Mode::kRefuse;
    mode = m;
    delay = d;
    if (m == Mode::kReset || m == Mode::kRefuse) {
      for (const auto& c : live) Kill(*c);
    }
    boost::system::error_code ignored;
    if (m == Mode::kRefuse && !was_refusing) acceptor.close(ignored);
    if (m != Mode::kRefuse && was_refusing) {
      // Listening again on the same port; until now connects were refused by the kernel.
      acceptor.open(tcp::v4());
      acceptor.set_option(tcp::acceptor::reuse_address(true));
      acceptor.bind(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
      acceptor.listen();
      asio::co_spawn(io, Accept(), asio::detached);
    }
    // Wake every pump waiting out a partition; the timer is re-armed for the next wait.
    changed.cancel();
    changed.expires_at(asio::steady_timer::time_point::max());
  }

  // RST rather than FIN: SO_LINGER 0 makes close() abort the connection.
  static void Kill(Connection& c) {
    boost::system::error_code ignored;
    for (auto* s : {&c.client, &c.upstream}) {
      if (!s->is_open()) continue;
      s->set_option(tcp::socket::linger(true, 0), ignored);
      s->close(ignored);
    }
  }

  void Forget(const std::shared_ptr<Connection>& c) {
    if (live.erase(c) > 0) --open;
  }

  std::string upstream_host;
  std::uint16_t upstream_port;
  asio::io_context io;
  tcp::acceptor acceptor;
  std::uint16_t port;  // kept across a Refuse(), to listen on again
  asio::steady_timer changed;
  // Keeps the thread running while nothing is pending (the port closed by Refuse, no connection open).
  asio::executor_work_guard<asio::io_context::executor_type> work;
  std::set<std::shared_ptr<Connection>> live;
  std::atomic<Mode> mode{Mode::kPass};
  std::chrono::milliseconds delay{0};
  std::atomic<std::uint64_t> accepted{0};
  std::atomic<std::uint64_t> open{0};
  std::thread thread;
};

FaultProxy::FaultProxy(std::string upstream_host, std::uint16_t upstream_port, std::uint16_t listen_port)
    : state_(std::make_shared<State>(std::move(upstream_host), upstream_port, listen_port)) {
  asio::co_spawn(state_->io, state_->Accept(), asio::detached);
  asio::co_spawn(state_->io, state_->EndClosedDuringPartition(), asio::detached);
  state_->thread = std::thread([s = state_] { s->io.run(); });
}

FaultProxy::~FaultProxy() {
  asio::post(state_->io, [s = state_] {
    boost::system::error_code ignored;
    s->acceptor.close(ignored);
    for (const auto& c : s->live) State::Kill(*c);
    s->changed.cancel();
    s->work.reset();
    s->io.stop();
  });
  if (state_->thread.joinable()) state_->thread.join();
}

std::uint16_t FaultProxy::port() const { return state_->port; }

// Applied on the proxy's thread; returns once it is in effect.
void FaultProxy::Switch(Mode mode, std::chrono::milliseconds delay) {
  asio::post(state_->io, asio::use_future([s = state_, mode, delay] { s->Set(mode, delay); })).get();
}

void FaultProxy::Pass() { Switch(Mode::kPass, std::chrono::milliseconds{0}); }
void FaultProxy::Delay(std::chrono::milliseconds delay) { Switch(Mode::kDelay, delay); }
void FaultProxy::BlackHole() { Switch(Mode::kBlackHole, std::chrono::milliseconds{0}); }
void FaultProxy::Reset() { Switch(Mode::kReset, std::chrono::milliseconds{0}); }
void FaultProxy::Refuse() { Switch(Mode::kRefuse, std::chrono::milliseconds{0}); }
FaultProxy::Mode FaultProxy::mode() const { return state_->mode; }
std::uint64_t FaultProxy::accepted() const { return state_->accepted; }
std::uint64_t FaultProxy::open() const { return state_->open; }

namespace {

// [start, end) of the authority's host:port in `uri`: after "scheme://" and any "user@", up to '/' or '?'.
std::pair<std::size_t, std::size_t> AuthorityHostPort(const std::string& uri) {
  const auto scheme = uri.find("://");
  if (scheme == std::string::npos) throw std::invalid_argument("not a URI: " + uri);
  const auto start = scheme + 3;
  const auto end = std::min(uri.find('/', start), uri.find('?', start));
  const auto at = uri.rfind('@', end == std::string::npos ? std::string::npos : end);
  return {at != std::string::npos && at >= start ? at + 1 : start, end == std::string::npos ? uri.size() : end};
}

}  // namespace

Endpoint UriEndpoint(const std::string& uri) {
  const auto [start, end] = AuthorityHostPort(uri);
  const auto hostport = uri.substr(start, end - start);
  const auto colon = hostport.rfind(':');
  if (colon == std::string::npos) return {hostport, 5432};
  return {hostport.substr(0, colon), static_cast<std::uint16_t>(std::stoi(hostport.substr(colon + 1)))};
}

std::string WithEndpoint(const std::string& uri, const Endpoint& endpoint) {
  const auto [start, end] = AuthorityHostPort(uri);
  return uri.substr(0, start) + endpoint.host + ":" + std::to_string(endpoint.port) + uri.substr(end);
}

}  // namespace charge_outbox::testing
