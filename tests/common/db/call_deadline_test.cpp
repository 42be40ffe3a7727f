// CallDeadlines on a socket pair: a call past its deadline has its socket shut down under it (the peer
// reads end of stream) and reports expired(); one disarmed in time is left alone. The watcher sleeps until
// the earliest deadline, so a deadline armed after a later one must still be kept on time.
#include "db/call_deadline.hpp"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <thread>

namespace charge_outbox::db {
namespace {

using namespace std::chrono_literals;
using Clock = CallDeadlines::Clock;

// A connected pair of sockets: [0] is the call's, [1] the far end.
struct SocketPair {
  SocketPair() { EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds.data()), 0); }
  ~SocketPair() {
    ::close(fds[0]);
    ::close(fds[1]);
  }
  // Whether the far end sees end of stream within `within`.
  bool PeerSeesEndWithin(std::chrono::milliseconds within) const {
    pollfd p{fds[1], POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(within.count())) <= 0) return false;
    char byte = 0;
    return ::read(fds[1], &byte, 1) == 0;
  }
  std::array<int, 2> fds{-1, -1};
};

TEST(CallDeadlinesTest, AnEarlierDeadlineArmedAfterALaterOneIsKeptOnTime) {
  CallDeadlines deadlines;
  SocketPair late;
  SocketPair early;
  const auto armed_late = deadlines.Arm(late.fds[0], Clock::now() + 5s);
  std::this_thread::sleep_for(50ms);  // the watcher is asleep until the later deadline by now
  const auto started = Clock::now();
  const auto armed_early = deadlines.Arm(early.fds[0], Clock::now() + 100ms);
  EXPECT_TRUE(early.PeerSeesEndWithin(2s));
  EXPECT_LT(Clock::now() - started, 1s) << "the watcher slept on until the later deadline";
  EXPECT_TRUE(armed_early.expired());
  EXPECT_FALSE(armed_late.expired());
  EXPECT_FALSE(late.PeerSeesEndWithin(0ms));
}

TEST(CallDeadlinesTest, ACallDisarmedInTimeKeepsItsSocket) {
  CallDeadlines deadlines;
  SocketPair pair;
  {
    const auto armed = deadlines.Arm(pair.fds[0], Clock::now() + 200ms);
    EXPECT_FALSE(armed.expired());
  }
  EXPECT_FALSE(pair.PeerSeesEndWithin(400ms));
  // Many calls in a row, each disarmed before its deadline: none is cut, and the last one that is not
  // disarmed still is.
  for (int i = 0; i < 1000; ++i) {
    const auto armed = deadlines.Arm(pair.fds[0], Clock::now() + 1s);
    EXPECT_FALSE(armed.expired());
  }
  const auto kept = deadlines.Arm(pair.fds[0], Clock::now() + 50ms);
  EXPECT_TRUE(pair.PeerSeesEndWithin(2s));
  EXPECT_TRUE(kept.expired());
}

}  // namespace
}  // namespace charge_outbox::db
