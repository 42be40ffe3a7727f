// CallDeadlines: the client-side deadline of a blocking libpq call. libpqxx 6 has no per-call timeout:
// a statement sent to a server (or proxy) that accepted it and never answers waits in recv() for as long
// as TCP keeps the connection, which a peer that still acknowledges packets keeps forever. So one thread
// watches every armed call and, when its deadline passes, shuts the connection's socket down under it:
// the call returns at once with a broken connection (unavailable; in doubt during COMMIT), and the
// connection is dropped, which also tells the server to end the session.
//
// Thread-safe. The socket is dup()ed while armed, so a connection closed meanwhile can never make the
// watcher shut down another socket that reused its number.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <thread>

namespace charge_outbox::db {

class CallDeadlines {
 public:
  using Clock = std::chrono::steady_clock;

  CallDeadlines();
  ~CallDeadlines();
  CallDeadlines(const CallDeadlines&) = delete;
  CallDeadlines& operator=(const CallDeadlines&) = delete;

  // One armed call: disarmed when destroyed. expired() says whether the deadline cut the call short.
  class Armed {
   public:
    Armed(Armed&& other) noexcept;
    Armed& operator=(Armed&&) = delete;
    ~Armed();
    bool expired() const;

   private:
    friend class CallDeadlines;
    Armed(CallDeadlines* owner, std::uint64_t id) : owner_(owner), id_(id) {}
    CallDeadlines* owner_;
    std::uint64_t id_;
  };

  // Arms `deadline` for a call on `socket` (a connected socket; -1 arms nothing).
  [[nodiscard]] Armed Arm(int socket, Clock::time_point deadline);

 private:
  struct Entry {
    int socket = -1;  // our dup, closed on disarm
    Clock::time_point deadline;
    bool expired = false;
  };
  void Watch();
  void Disarm(std::uint64_t id);
  bool Expired(std::uint64_t id) const;

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::uint64_t, Entry> entries_;
  std::uint64_t next_id_ = 1;
  Clock::time_point wake_at_ = Clock::time_point::max();  // when the watcher wakes next, unless notified
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace charge_outbox::db
