#include "db/call_deadline.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

namespace charge_outbox::db {

CallDeadlines::CallDeadlines() : thread_([this] { Watch(); }) {}

CallDeadlines::~CallDeadlines() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
  for (auto& [id, entry] : entries_) ::close(entry.socket);
}

CallDeadlines::Armed CallDeadlines::Arm(int socket, Clock::time_point deadline) {
  const int copy = socket >= 0 ? ::dup(socket) : -1;
  std::lock_guard lock(mutex_);
  const auto id = next_id_++;
  if (copy >= 0) {
    entries_.emplace(id, Entry{.socket = copy, .deadline = deadline, .expired = false});
    // Calls share one call_timeout, so a new deadline is nearly always later than one already watched:
    // the watcher, asleep until that one, need not wake (a wake-up per database call was a context
    // switch per call).
    if (deadline < wake_at_) {
      wake_at_ = deadline;
      changed_.notify_all();
    }
  }
  return Armed(this, id);
}

void CallDeadlines::Disarm(std::uint64_t id) {
  std::lock_guard lock(mutex_);
  if (const auto it = entries_.find(id); it != entries_.end()) {
    ::close(it->second.socket);
    entries_.erase(it);
  }
}

bool CallDeadlines::Expired(std::uint64_t id) const {
  std::lock_guard lock(mutex_);
  const auto it = entries_.find(id);
  return it != entries_.end() && it->second.expired;
}

void CallDeadlines::Watch() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    auto next = Clock::time_point::max();
    const auto now = Clock::now();
    for (auto& [id, entry] : entries_) {
      if (entry.expired) continue;
      if (entry.deadline <= now) {
        // Both directions: the blocked recv() sees end of stream, and the peer gets our FIN.
        ::shutdown(entry.socket, SHUT_RDWR);
        entry.expired = true;
      } else {
        next = std::min(next, entry.deadline);
      }
    }
    wake_at_ = next;
    if (next == Clock::time_point::max()) {
      changed_.wait(lock);
    } else {
      changed_.wait_until(lock, next);
    }
  }
}

CallDeadlines::Armed::Armed(Armed&& other) noexcept : owner_(other.owner_), id_(other.id_) { other.owner_ = nullptr; }

CallDeadlines::Armed::~Armed() {
  if (owner_ != nullptr) owner_->Disarm(id_);
}

bool CallDeadlines::Armed::expired() const { return owner_ != nullptr && owner_->Expired(id_); }

}  // namespace charge_outbox::db
