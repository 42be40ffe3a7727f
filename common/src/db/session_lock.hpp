// SessionLock: a session-level advisory lock held for a scope, for work that must run once at a time
// across processes (a retention pass). Internal to common/ (it exposes libpqxx).
#pragma once

#include <pqxx/pqxx>

#include <optional>

namespace charge_outbox::db {

class SessionLock {
 public:
  // The lock (space, key) if no other session holds it, else nullopt; never waits.
  static std::optional<SessionLock> TryAcquire(pqxx::connection& conn, int space, int key);

  SessionLock(SessionLock&& other) noexcept : conn_(other.conn_), space_(other.space_), key_(other.key_) {
    other.conn_ = nullptr;
  }
  SessionLock(const SessionLock&) = delete;
  SessionLock& operator=(const SessionLock&) = delete;
  SessionLock& operator=(SessionLock&&) = delete;
  // Releases it; a session that broke meanwhile released it with itself.
  ~SessionLock();

 private:
  SessionLock(pqxx::connection& conn, int space, int key) : conn_(&conn), space_(space), key_(key) {}
  pqxx::connection* conn_;
  int space_;
  int key_;
};

}  // namespace charge_outbox::db
