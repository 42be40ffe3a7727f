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

std::vector<DayTable> DayTables(pqxx::connection& conn, std::string_view prefix) {
  pqxx::nontransaction tx(conn);
  // The day is the name's last eight characters.
  const auto rows = tx.exec_params(
      "SELECT c.relname, (now() AT TIME ZONE 'UTC')::date - to_date(right(c.relname, 8), 'YYYYMMDD'),"
      "       COALESCE(p.relname, '')"
      " FROM pg_class c LEFT JOIN pg_inherits i ON i.inhrelid = c.oid LEFT JOIN pg_class p ON p.oid = i.inhparent"
      " WHERE c.relkind = 'r' AND c.relname ~ ('^' || $1::text || '_[0-9]{8}$') AND pg_table_is_visible(c.oid)"
      " ORDER BY c.relname",
      std::string(prefix));
  std::vector<DayTable> days;
  days.reserve(static_cast<std::size_t>(rows.size()));
  for (const auto& row : rows) {
    days.push_back({row[0].as<std::string>(), row[1].as<int>(), row[2].as<std::string>()});
  }
  return days;
}

std::vector<std::string> PastRetention(const std::vector<DayTable>& days, std::string_view parent,
                                       int retention_days) {
  std::vector<std::string> names;
  for (const auto& day : days) {
    if (day.parent == parent && day.age_days > retention_days) names.push_back(day.name);
  }
  return names;
}

std::optional<RetentionPass> BeginRetentionPass(pqxx::connection& conn, int lock_space, std::string_view parent,
                                                int days_ahead) {
  auto lock = SessionLock::TryAcquire(conn, lock_space, 0);
  if (!lock) return std::nullopt;
  const int created = EnsureDayPartitions(conn, parent, days_ahead);
  return RetentionPass{std::move(*lock), created, DayTables(conn, parent)};
}

}  // namespace charge_outbox::db
