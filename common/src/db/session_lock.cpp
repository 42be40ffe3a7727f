#include "db/session_lock.hpp"

namespace charge_outbox::db {

std::optional<SessionLock> SessionLock::TryAcquire(pqxx::connection& conn, int space, int key) {
  pqxx::nontransaction tx(conn);
  if (!tx.exec_params1("SELECT pg_try_advisory_lock($1::int, $2::int)", space, key)[0].as<bool>()) return std::nullopt;
  return SessionLock(conn, space, key);
}

SessionLock::~SessionLock() {
  if (conn_ == nullptr) return;
  try {
    pqxx::nontransaction tx(*conn_);
    tx.exec_params("SELECT pg_advisory_unlock($1::int, $2::int)", space_, key_);
  } catch (...) {
    // A broken session released the lock with itself.
  }
}

}  // namespace charge_outbox::db
