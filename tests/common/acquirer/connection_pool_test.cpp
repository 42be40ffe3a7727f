// The acquirer client's keep-alive pool alone, over real loopback sockets (the pool looks into an idle
// socket before reusing it) and a clock the test moves: a released connection is reused, one idle too
// long or closed by the acquirer is not, one the caller calls broken is closed, and the bound queues
// callers in order until their deadline.
#include "acquirer/connection_pool.hpp"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/strand.hpp>

#include "run_sync.hpp"

namespace charge_outbox::acquirer::detail {
namespace {

namespace asio = boost::asio;
using std::chrono::milliseconds;
using testing::RunSync;
using tcp = asio::ip::tcp;

SteadyClock::time_point fake_now = SteadyClock::time_point{} + std::chrono::hours{1};
SteadyClock::time_point FakeNow() { return fake_now; }

class ConnectionPoolTest : public ::testing::Test {
 protected:
  ConnectionPoolTest() : acceptor_(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {}

  // A connection to our acceptor; the accepted end is kept so the test can close it as an acquirer would.
  std::shared_ptr<Connection> Connect() {
    auto connection = std::make_shared<Connection>();
    connection->plain = std::make_unique<boost::beast::tcp_stream>(strand_);
    connection->plain->socket().connect(acceptor_.local_endpoint());
    peers_.push_back(acceptor_.accept());
    return connection;
  }

  ConnectionPool::Lease Acquire(ConnectionPool& pool, milliseconds wait = milliseconds{2000}) {
    return RunSync(io_, pool.Acquire(SteadyClock::now() + wait));
  }

  asio::io_context io_;
  Strand strand_{asio::make_strand(asio::any_io_executor(io_.get_executor()))};
  tcp::acceptor acceptor_;
  std::vector<tcp::socket> peers_;
};

TEST_F(ConnectionPoolTest, AReleasedConnectionIsReusedMostRecentFirst) {
  ConnectionPool pool(strand_, 4, milliseconds{30'000}, &FakeNow);
  ASSERT_EQ(Acquire(pool).connection, nullptr);  // a slot to open a connection in
  ASSERT_EQ(Acquire(pool).connection, nullptr);
  const auto first = Connect();
  const auto second = Connect();
  pool.Release(first, true);
  pool.Release(second, true);
  EXPECT_EQ(pool.Stats().open, 2u);
  EXPECT_EQ(pool.Stats().idle, 2u);

  const auto lease = Acquire(pool);
  EXPECT_EQ(lease.connection, second);
  EXPECT_FALSE(lease.queued);
  EXPECT_EQ(Acquire(pool).connection, first);
  EXPECT_EQ(pool.Stats().idle, 0u);
  EXPECT_EQ(pool.Stats().open, 2u);
  EXPECT_EQ(pool.Stats().stale_discarded, 0u);
}

TEST_F(ConnectionPoolTest, AConnectionIdleForTheIdleTimeoutIsClosedNotReused) {
  ConnectionPool pool(strand_, 1, milliseconds{30'000}, &FakeNow);
  ASSERT_EQ(Acquire(pool).connection, nullptr);
  const auto connection = Connect();
  pool.Release(connection, true);

  fake_now += milliseconds{29'999};
  const auto warm = Acquire(pool);
  EXPECT_EQ(warm.connection, connection);
  pool.Release(connection, true);  // idle again from now

  fake_now += milliseconds{30'000};
  const auto lease = Acquire(pool);
  EXPECT_EQ(lease.connection, nullptr);  // its slot, for a fresh connection
  EXPECT_FALSE(connection->Tcp().socket().is_open());
  EXPECT_EQ(pool.Stats().stale_discarded, 1u);
  EXPECT_EQ(pool.Stats().open, 1u);
}

TEST_F(ConnectionPoolTest, ABrokenConnectionIsClosedAndItsSlotFreed) {
  ConnectionPool pool(strand_, 1, milliseconds{30'000}, &FakeNow);
  ASSERT_EQ(Acquire(pool).connection, nullptr);
  const auto connection = Connect();
  pool.Release(connection, false);
  EXPECT_FALSE(connection->Tcp().socket().is_open());
  EXPECT_EQ(pool.Stats().open, 0u);
  EXPECT_EQ(pool.Stats().idle, 0u);
  EXPECT_EQ(Acquire(pool).connection, nullptr);
  EXPECT_EQ(pool.Stats().stale_discarded, 0u);  // never pooled, so never found stale
}

TEST_F(ConnectionPoolTest, AConnectionTheAcquirerClosedWhileIdleIsNotReused) {
  ConnectionPool pool(strand_, 1, milliseconds{30'000}, &FakeNow);
  ASSERT_EQ(Acquire(pool).connection, nullptr);
  const auto connection = Connect();
  pool.Release(connection, true);
  peers_.back().close();  // the FIN is in our socket before the next call looks

  const auto lease = Acquire(pool);
  EXPECT_EQ(lease.connection, nullptr);
  EXPECT_EQ(pool.Stats().stale_discarded, 1u);
}

TEST_F(ConnectionPoolTest, BeyondTheBoundACallWaitsForTheNextReleaseOrItsDeadline) {
  ConnectionPool pool(strand_, 1, milliseconds{30'000}, &FakeNow);
  ASSERT_EQ(Acquire(pool).connection, nullptr);
  const auto connection = Connect();

  const auto timed_out = Acquire(pool, milliseconds{50});
  EXPECT_TRUE(timed_out.timed_out);

  std::optional<ConnectionPool::Lease> waited;
  asio::co_spawn(strand_, pool.Acquire(SteadyClock::now() + milliseconds{5000}),
                 [&](std::exception_ptr, ConnectionPool::Lease lease) { waited = std::move(lease); });
  io_.restart();
  io_.poll();
  ASSERT_FALSE(waited.has_value());  // queued behind the busy connection
  pool.Release(connection, true);
  io_.restart();
  while (!waited.has_value()) io_.run_one_for(milliseconds{100});
  EXPECT_EQ(waited->connection, connection);  // handed over, not parked idle
  EXPECT_TRUE(waited->queued);
  EXPECT_EQ(pool.Stats().idle, 0u);
  EXPECT_EQ(pool.Stats().open, 1u);
}

}  // namespace
}  // namespace charge_outbox::acquirer::detail
