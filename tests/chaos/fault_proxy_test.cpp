// FaultProxy between a client and a loopback echo server: each mode does to a live connection what it
// says, and a healed partition delivers what was written during it, in order.
#include "fault_proxy.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace charge_outbox::testing {
namespace {

using namespace std::chrono_literals;

// Echoes every byte back, one thread per connection.
class EchoServer {
 public:
  EchoServer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(fd_, 16);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] {
      for (;;) {
        const int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0) return;
        workers_.emplace_back([this, c] {
          char buf[4096];
          for (ssize_t n; (n = ::read(c, buf, sizeof buf)) > 0;) {
            if (::write(c, buf, static_cast<std::size_t>(n)) != n) break;
          }
          ::close(c);
          ++ended_;
        });
      }
    });
  }
  ~EchoServer() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
    for (auto& w : workers_) w.detach();
  }
  std::uint16_t port() const { return port_; }
  // Connections whose client side (the proxy) closed or reset them.
  int ended() const { return ended_.load(); }

 private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<int> ended_{0};
  std::thread thread_;
  std::vector<std::thread> workers_;
};

// A blocking client with a receive timeout.
class Client {
 public:
  explicit Client(std::uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~Client() { Close(); }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  bool Send(const std::string& s) { return ::write(fd_, s.data(), s.size()) == static_cast<ssize_t>(s.size()); }
  // Up to `n` bytes within `timeout`; "" on timeout, "<closed>" or "<reset>" when the peer ended it.
  std::string Receive(std::size_t n, std::chrono::milliseconds timeout) {
    timeval tv{static_cast<time_t>(timeout.count() / 1000), static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    std::string out;
    while (out.size() < n) {
      char buf[4096];
      const auto got = ::read(fd_, buf, std::min(sizeof buf, n - out.size()));
      if (got > 0) {
        out.append(buf, static_cast<std::size_t>(got));
        continue;
      }
      if (got == 0) return out.empty() ? "<closed>" : out;
      if (errno == ECONNRESET) return "<reset>";
      break;  // timeout
    }
    return out;
  }
  bool connected() const { return connected_; }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

class FaultProxyTest : public ::testing::Test {
 protected:
  EchoServer echo_;
  FaultProxy proxy_{"127.0.0.1", echo_.port()};
};

TEST_F(FaultProxyTest, PassForwardsBothWays) {
  Client c(proxy_.port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.Send("hello"));
  EXPECT_EQ(c.Receive(5, 2s), "hello");
  EXPECT_EQ(proxy_.accepted(), 1u);
}

TEST_F(FaultProxyTest, DelayHoldsEachChunk) {
  proxy_.Delay(300ms);
  Client c(proxy_.port());
  const auto started = std::chrono::steady_clock::now();
  ASSERT_TRUE(c.Send("x"));
  EXPECT_EQ(c.Receive(1, 3s), "x");
  EXPECT_GE(std::chrono::steady_clock::now() - started, 600ms);  // held once each way
}

TEST_F(FaultProxyTest, ABlackHoleNeitherAnswersNorClosesAndHealsInOrder) {
  Client c(proxy_.port());
  ASSERT_TRUE(c.Send("a"));
  ASSERT_EQ(c.Receive(1, 2s), "a");
  proxy_.BlackHole();
  ASSERT_TRUE(c.Send("bcd"));
  EXPECT_EQ(c.Receive(3, 500ms), "");  // no answer, no close
  Client late(proxy_.port());          // a new connection hangs the same way
  ASSERT_TRUE(late.Send("z"));
  EXPECT_EQ(late.Receive(1, 300ms), "");
  proxy_.Pass();
  EXPECT_EQ(c.Receive(3, 2s), "bcd");
  EXPECT_EQ(late.Receive(1, 2s), "z");
}

// A client that gives up during a partition ends the upstream connection too (a real server's keepalives
// would, later): a database session abandoned behind a black hole does not keep its locks forever.
TEST_F(FaultProxyTest, AClientClosingDuringABlackHoleEndsTheUpstreamConnection) {
  Client c(proxy_.port());
  ASSERT_TRUE(c.Send("a"));
  ASSERT_EQ(c.Receive(1, 2s), "a");
  Client other(proxy_.port());
  ASSERT_TRUE(other.Send("b"));
  ASSERT_EQ(other.Receive(1, 2s), "b");
  proxy_.BlackHole();
  ASSERT_TRUE(c.Send("unread"));  // bytes in front of the close, which the proxy does not read
  c.Close();
  const auto deadline = std::chrono::steady_clock::now() + 2s;
  while ((echo_.ended() < 1 || proxy_.open() > 1) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(echo_.ended(), 1);
  EXPECT_EQ(proxy_.open(), 1u);  // the other connection is still partitioned, not ended
  proxy_.Pass();
  ASSERT_TRUE(other.Send("c"));
  EXPECT_EQ(other.Receive(1, 2s), "c");
}

TEST_F(FaultProxyTest, ResetAbortsOpenConnectionsAndRefusesNewOnes) {
  Client c(proxy_.port());
  ASSERT_TRUE(c.Send("a"));
  ASSERT_EQ(c.Receive(1, 2s), "a");
  proxy_.Reset();
  EXPECT_EQ(c.Receive(1, 2s), "<reset>");
  Client next(proxy_.port());
  next.Send("b");
  const auto got = next.Receive(1, 2s);
  EXPECT_TRUE(got == "<reset>" || got == "<closed>") << got;
  proxy_.Pass();
  Client healed(proxy_.port());
  ASSERT_TRUE(healed.Send("c"));
  EXPECT_EQ(healed.Receive(1, 2s), "c");
}

TEST_F(FaultProxyTest, RefuseClosesThePortUntilHealed) {
  Client before(proxy_.port());
  ASSERT_TRUE(before.Send("a"));
  ASSERT_EQ(before.Receive(1, 2s), "a");
  proxy_.Refuse();
  EXPECT_EQ(before.Receive(1, 2s), "<reset>");
  Client refused(proxy_.port());
  EXPECT_FALSE(refused.connected());  // ECONNREFUSED: nothing listens
  proxy_.Pass();
  Client healed(proxy_.port());
  ASSERT_TRUE(healed.connected());
  ASSERT_TRUE(healed.Send("b"));
  EXPECT_EQ(healed.Receive(1, 2s), "b");
}

}  // namespace
}  // namespace charge_outbox::testing
