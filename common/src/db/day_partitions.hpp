// Day partitions: the tables partitioned by day (outbox, inbox) call each day's partition
// <parent>_YYYYMMDD and make them with <parent>_ensure_partitions(from, to) (sql/migrations/0001_core.sql,
// sql/inbox/0001_inbox.sql). The retention passes of both make the days ahead and list the days past retention
// through these two functions; what a pass then does with each day (look for unpublished rows, detach,
// drop) is its own. Internal to common/ (it exposes libpqxx).
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

// The day partitions of `parent` whose whole day ended at least `retention_days` days before today (UTC),
// oldest first. Only tables named <parent>_YYYYMMDD count: anything else attached is not ours to drop.
std::vector<std::string> DayPartitionsPastRetention(pqxx::connection& conn, std::string_view parent,
                                                    int retention_days);

// The start every retention pass shares: its lock (one pass at a time across every session of the
// database, since two creating the same partition at once would make one of them fail), the days ahead
// made, the days past retention listed. nullopt when another session holds the lock (skip this round).
// Keep it for the rest of the pass: the lock goes with it.
struct RetentionPass {
  SessionLock lock;
  int partitions_created = 0;
  std::vector<std::string> past_retention;
};
std::optional<RetentionPass> BeginRetentionPass(pqxx::connection& conn, int lock_space, std::string_view parent,
                                                int days_ahead, int retention_days);

}  // namespace charge_outbox::db
