// Day partitions: the tables partitioned by day (outbox, inbox) call each day's partition
// <parent>_YYYYMMDD and make them with <parent>_ensure_partitions(from, to) (sql/migrations/0001_core.sql,
// sql/inbox/0001_inbox.sql). The retention passes of both make the days ahead and list the day tables through
// these functions; what a pass then does with each day (look for unpublished rows, detach, move, drop) is
// its own. Internal to common/ (it exposes libpqxx).
#pragma once

#include <pqxx/pqxx>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "db/session_lock.hpp"

namespace charge_outbox::db {

// Makes sure `parent` has its partitions from yesterday to `days_ahead` days after today (UTC); returns
// how many it created. `parent` is a table name of the code's, never input.
int EnsureDayPartitions(pqxx::connection& conn, std::string_view parent, int days_ahead);

// A table named <prefix>_YYYYMMDD, wherever it hangs: a partition made by <prefix>_ensure_partitions, a
// child of another parent (outbox_history), or a table of its own. Nothing else counts: a table not named
// so is not ours to move or drop.
struct DayTable {
  std::string name;
  int age_days = 0;    // today (UTC) minus its day: 1 is yesterday, days ahead are negative
  std::string parent;  // the table it is a partition or child of; empty if none
};
std::vector<DayTable> DayTables(pqxx::connection& conn, std::string_view prefix);

// The partitions of `parent` among `days` whose whole day ended at least `retention_days` days before today
// (UTC), oldest first.
std::vector<std::string> PastRetention(const std::vector<DayTable>& days, std::string_view parent,
                                       int retention_days);

// The start every retention pass shares: its lock (one pass at a time across every session of the
// database, since two creating the same partition at once would make one of them fail), the days ahead
// made, the day tables listed (oldest first). nullopt when another session holds the lock (skip this round).
// Keep it for the rest of the pass: the lock goes with it.
struct RetentionPass {
  SessionLock lock;
  int partitions_created = 0;
  std::vector<DayTable> days;
};
std::optional<RetentionPass> BeginRetentionPass(pqxx::connection& conn, int lock_space, std::string_view parent,
                                                int days_ahead);

}  // namespace charge_outbox::db
