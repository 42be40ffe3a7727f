#include "connection_pool.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cerrno>

namespace charge_outbox::acquirer::detail {

namespace asio = boost::asio;

ConnectionPool::ConnectionPool(const Strand& strand, std::size_t max_connections,
                               std::chrono::milliseconds idle_timeout, Now now)
    : strand_(strand), max_connections_(max_connections), idle_timeout_(idle_timeout), now_(now) {}

// Whether an idle pooled connection may carry another request. The acquirer may have closed it while it
// sat idle; writing to it would then end in an "unknown" for a request that never reached the
// acquirer's application. A FIN (or any unsolicited byte, such as a TLS close_notify or a 408) already
// in the socket is visible without blocking, so look before reuse. A close that races this check still
// ends as unknown: that is the conservative answer, and the caller's retry with the same key is safe.
bool ConnectionPool::StillUsable(Connection& connection) const {
  if (now_() - connection.idle_since >= idle_timeout_) return false;
  if (connection.buffer.size() != 0) return false;
  auto& socket = connection.Tcp().socket();
  if (!socket.is_open()) return false;
  char byte = 0;
  const auto n = ::recv(socket.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n >= 0) return false;
  return errno == EAGAIN || errno == EWOULDBLOCK;
}

void ConnectionPool::Discard(Connection& connection) {
  ++stats_.stale_discarded;
  connection.Close();
}

asio::awaitable<ConnectionPool::Lease> ConnectionPool::Acquire(SteadyClock::time_point deadline) {
  while (!idle_.empty()) {
    // Most recently used first: the warmest connection is the least likely to have been closed.
    auto connection = std::move(idle_.back());
    idle_.pop_back();
    if (StillUsable(*connection)) co_return Lease{std::move(connection), false};
    Discard(*connection);
    --open_;
  }
  if (open_ < max_connections_) {
    ++open_;
    co_return Lease{};
  }
  auto waiter = std::make_shared<Waiter>(strand_);
  waiter->timer.expires_at(deadline);
  waiters_.push_back(waiter);
  co_await waiter->timer.async_wait(asio::as_tuple(asio::use_awaitable));
  if (!waiter->granted) {
    std::erase(waiters_, waiter);
    co_return Lease{nullptr, true};
  }
  if (waiter->connection != nullptr && !StillUsable(*waiter->connection)) {
    Discard(*waiter->connection);
    waiter->connection.reset();  // keep the slot: open a fresh connection in it
  }
  co_return Lease{std::move(waiter->connection), false, true};
}

void ConnectionPool::Release(std::shared_ptr<Connection> connection, bool reusable) {
  if (connection != nullptr && !reusable) {
    connection->Close();
    connection.reset();
  }
  if (connection != nullptr) connection->idle_since = now_();
  if (!waiters_.empty()) {
    auto waiter = std::move(waiters_.front());
    waiters_.pop_front();
    waiter->granted = true;
    waiter->connection = std::move(connection);
    waiter->timer.cancel();
    return;
  }
  if (connection != nullptr) {
    idle_.push_back(std::move(connection));
  } else {
    --open_;
  }
}

HttpAcquirerClient::PoolStats ConnectionPool::Stats() const {
  auto stats = stats_;
  stats.open = open_;
  stats.idle = idle_.size();
  return stats;
}

}  // namespace charge_outbox::acquirer::detail
