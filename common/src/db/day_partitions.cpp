#include "db/day_partitions.hpp"

#include <utility>

namespace charge_outbox::db {

int EnsureDayPartitions(pqxx::connection& conn, std::string_view parent, int days_ahead) {
  // A function's name cannot be a parameter; quote_name keeps it one identifier.
  const auto function = conn.quote_name(std::string(parent) + "_ensure_partitions");
  pqxx::nontransaction tx(conn);
  return tx
      .exec_params1("SELECT " + function +
                        "((now() AT TIME ZONE 'UTC')::date - 1, (now() AT TIME ZONE 'UTC')::date + $1::int)",
                    days_ahead)[0]
      .as<int>();
}

std::vector<std::string> DayPartitionsPastRetention(pqxx::connection& conn, std::string_view parent,
                                                    int retention_days) {
  pqxx::nontransaction tx(conn);
  // The day is the name's last eight characters: substr from just past "<parent>_".
  const auto rows = tx.exec_params(
      "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
      " WHERE i.inhparent = $1::text::regclass AND c.relname ~ ('^' || $1::text || '_[0-9]{8}$')"
      "   AND to_date(substr(c.relname, length($1::text) + 2), 'YYYYMMDD') + 1"
      "       <= (now() AT TIME ZONE 'UTC')::date - $2::int"
      " ORDER BY c.relname",
      std::string(parent), retention_days);
  std::vector<std::string> names;
  names.reserve(static_cast<std::size_t>(rows.size()));
  for (const auto& row : rows) names.push_back(row[0].as<std::string>());
  return names;
}

std::optional<RetentionPass> BeginRetentionPass(pqxx::connection& conn, int lock_space, std::string_view parent,
                                                int days_ahead, int retention_days) {
  auto lock = SessionLock::TryAcquire(conn, lock_space, 0);
  if (!lock) return std::nullopt;
  const int created = EnsureDayPartitions(conn, parent, days_ahead);
  return RetentionPass{std::move(*lock), created, DayPartitionsPastRetention(conn, parent, retention_days)};
}

}  // namespace charge_outbox::db
