// Private to the acquirer client: the bounded pool of keep-alive connections. It hands out slots, not
// sockets: a lease is an idle connection to reuse or the right to open one, and a call that finds every
// slot taken waits in line until its deadline. It does no I/O but closing what it will not reuse; the
// dialer opens connections and an exchange uses them.
//
// Not thread-safe: every call runs on the client's strand, the one the pool was given.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstddef>
#include <deque>
#include <memory>
#include <vector>

#include "charge_outbox/acquirer/http_acquirer_client.hpp"
#include "connection.hpp"

namespace charge_outbox::acquirer::detail {

class ConnectionPool {
 public:
  using Now = SteadyClock::time_point (*)();

  // `now` is the clock idle time is measured on; a test passes its own.
  ConnectionPool(const Strand& strand, std::size_t max_connections, std::chrono::milliseconds idle_timeout,
                 Now now = &SteadyClock::now);
  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;

  // An idle connection to reuse (connection set), or a slot to open one in (connection null), or
  // timed_out when no slot came free before `deadline`. A lease that is not timed out holds a slot
  // until Release.
  struct Lease {
    std::shared_ptr<Connection> connection;
    bool timed_out = false;
    bool queued = false;  // granted after waiting behind busy connections
  };
  boost::asio::awaitable<Lease> Acquire(SteadyClock::time_point deadline);

  // Gives a slot back: to the oldest waiter (with the connection, if reusable), or to the pool. A
  // connection that is not reusable is closed. `connection` may be null (a slot nobody opened).
  void Release(std::shared_ptr<Connection> connection, bool reusable);

  // open, idle and stale_discarded (connections_opened is the dialer's count).
  HttpAcquirerClient::PoolStats Stats() const;

  // Gives the slot back when a call leaves by any path; the connection is reused only when the call
  // says so with Release(true).
  class Slot {
   public:
    explicit Slot(ConnectionPool& pool) : pool_(pool) {}
    ~Slot() {
      if (!done_) pool_.Release(std::move(connection_), false);
    }
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    void Hold(std::shared_ptr<Connection> connection) { connection_ = std::move(connection); }
    void Release(bool reusable) {
      done_ = true;
      pool_.Release(std::move(connection_), reusable);
    }

   private:
    ConnectionPool& pool_;
    std::shared_ptr<Connection> connection_;
    bool done_ = false;
  };

 private:
  struct Waiter {
    explicit Waiter(const Strand& strand) : timer(strand) {}
    boost::asio::steady_timer timer;
    bool granted = false;
    std::shared_ptr<Connection> connection;  // when granted: a connection to reuse, or null to open one
  };

  bool StillUsable(Connection& connection) const;
  void Discard(Connection& connection);

  Strand strand_;
  std::size_t max_connections_;
  std::chrono::milliseconds idle_timeout_;
  Now now_;
  std::vector<std::shared_ptr<Connection>> idle_;
  std::deque<std::shared_ptr<Waiter>> waiters_;
  std::size_t open_ = 0;  // slots taken: busy connections, connections being opened, and idle ones
  HttpAcquirerClient::PoolStats stats_;
};

}  // namespace charge_outbox::acquirer::detail
