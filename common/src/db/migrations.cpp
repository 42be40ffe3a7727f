#include "charge_outbox/db/migrations.hpp"

#include <pqxx/pqxx>

#include <algorithm>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string_view>

#include "charge_outbox/db/database.hpp"
#include "charge_outbox/util/sha256.hpp"

namespace charge_outbox::db {
namespace {

// An arbitrary constant shared by every migrator of this product; other products' advisory locks
// in the same database pick their own.
constexpr long long kMigrationLockKey = 0x636f5f6d69677261;  // "co_migra"

std::string CreateLedgerSql(const std::string& ledger) {
  return "CREATE TABLE IF NOT EXISTS " + ledger + R"sql( (
  version      integer PRIMARY KEY,
  name         text        NOT NULL,
  checksum     text        NOT NULL,
  applied_at   timestamptz NOT NULL DEFAULT now(),
  execution_ms integer     NOT NULL
))sql";
}

// The ledger's name is spliced into SQL, so it must be a plain lower-case identifier.
const std::string& CheckedLedger(const std::string& ledger) {
  static const std::regex kIdentifier("^[a-z_][a-z0-9_]{0,62}$");
  if (!std::regex_match(ledger, kIdentifier)) {
    throw MigrationError(MigrationErrc::kInvalidMigrationSet, "migration ledger '" + ledger + "' is not a plain identifier");
  }
  return ledger;
}

// The network settings every connection has (a hung server fails the start-up check or the migration in
// seconds), but no statement or idle-in-transaction timeout: a migration may build an index for minutes
// and bounds its waits with its own lock_timeout.
pqxx::connection Connect(const std::string& url) {
  ConnectionSettings settings;
  settings.statement_timeout = std::chrono::milliseconds{0};
  settings.idle_in_transaction_timeout = std::chrono::milliseconds{0};
  try {
    return pqxx::connection(ConnectionString(url, "", settings));
  } catch (const pqxx::broken_connection& e) {
    throw MigrationError(MigrationErrc::kDatabaseUnavailable,
                         std::string("cannot connect to the database: ") + e.what() +
                             " (check DATABASE_URL and that PostgreSQL is up)");
  }
}

std::map<int, AppliedMigration> ReadApplied(pqxx::connection& conn, const std::string& ledger) {
  pqxx::nontransaction tx(conn);
  const auto exists = tx.exec_params1("SELECT to_regclass($1) IS NOT NULL", ledger)[0].as<bool>();
  std::map<int, AppliedMigration> applied;
  if (!exists) return applied;
  for (const auto& row : tx.exec(
           "SELECT version, name, checksum, to_char(applied_at AT TIME ZONE 'UTC', "
           "'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') FROM " + ledger + " ORDER BY version")) {
    AppliedMigration m;
    m.version = row[0].as<int>();
    m.name = row[1].as<std::string>();
    m.checksum = row[2].as<std::string>();
    m.applied_at = row[3].as<std::string>();
    applied.emplace(m.version, std::move(m));
  }
  return applied;
}

// Applied texts of a migration that was edited after it shipped, with the same effect, because a server
// release refused the original: a database that applied one of these is as migrated as one that applied the
// file. Never for a change of effect (that is a new migration).
struct EquivalentChecksum {
  std::string_view name;
  std::string_view checksum;
};
constexpr EquivalentChecksum kEquivalentChecksums[] = {
    // PostgreSQL 15.20 refuses ALTER TABLE charges while charge_event_payload (a SQL-standard body) uses
    // its row type: the file now drops the function first and makes it again, as the earlier text replaced it.
    {"0012_operator_review", "5c523a74da9d6fc34c7541fa67ff935de4d4676ccd0adc6fe1e4e36fb29d5d70"},
};

bool IsEquivalent(const Migration& m, std::string_view applied_checksum) {
  for (const auto& e : kEquivalentChecksums) {
    if (e.name == m.name && e.checksum == applied_checksum) return true;
  }
  return false;
}

void VerifyChecksums(const std::vector<Migration>& known, const std::map<int, AppliedMigration>& applied) {
  for (const auto& m : known) {
    const auto it = applied.find(m.version);
    if (it == applied.end()) continue;
    const auto checksum = m.Checksum();
    if (it->second.checksum != checksum && !IsEquivalent(m, it->second.checksum)) {
      throw MigrationError(MigrationErrc::kChecksumMismatch,
                           "migration " + m.name + " was applied with checksum " + it->second.checksum +
                               " but its file now has checksum " + checksum +
                               "; never edit an applied migration: restore it and add a new one");
    }
  }
}

std::vector<Migration> Pending(const std::vector<Migration>& known, const std::map<int, AppliedMigration>& applied) {
  std::vector<Migration> pending;
  const int highest_applied = applied.empty() ? 0 : applied.rbegin()->first;
  for (const auto& m : known) {
    if (applied.contains(m.version)) continue;
    if (m.version < highest_applied) {
      throw MigrationError(MigrationErrc::kOutOfOrder,
                           "migration " + m.name + " is older than applied version " +
                               std::to_string(highest_applied) + "; renumber it after the newest one");
    }
    pending.push_back(m);
  }
  return pending;
}

}  // namespace

std::string Migration::Checksum() const { return util::Sha256Hex(sql); }

Migration MakeMigration(const std::string& file_name, std::string sql) {
  static const std::regex kPattern(R"(^([0-9]{4})_([a-z0-9_]+)\.sql$)");
  std::smatch match;
  if (!std::regex_match(file_name, match, kPattern)) {
    throw MigrationError(MigrationErrc::kInvalidMigrationSet,
                         "migration file " + file_name + " is not named NNNN_lower_snake_name.sql");
  }
  Migration m;
  m.version = std::stoi(match[1].str());
  m.name = match[1].str() + "_" + match[2].str();
  m.sql = std::move(sql);
  if (m.version == 0) {
    throw MigrationError(MigrationErrc::kInvalidMigrationSet, "migration versions start at 0001: " + file_name);
  }
  return m;
}

std::vector<Migration> SortedMigrationSet(std::vector<Migration> migrations) {
  std::sort(migrations.begin(), migrations.end(),
            [](const Migration& a, const Migration& b) { return a.version < b.version; });
  for (std::size_t i = 1; i < migrations.size(); ++i) {
    if (migrations[i].version == migrations[i - 1].version) {
      throw MigrationError(MigrationErrc::kInvalidMigrationSet,
                           "two migrations share version " + std::to_string(migrations[i].version) + ": " +
                               migrations[i - 1].name + " and " + migrations[i].name);
    }
  }
  return migrations;
}

std::vector<Migration> LoadMigrationsFromDirectory(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec);
  if (ec) {
    throw MigrationError(MigrationErrc::kInvalidMigrationSet,
                         "cannot read migrations directory " + dir.string() + ": " + ec.message());
  }
  std::vector<Migration> migrations;
  for (const auto& entry : it) {
    if (!entry.is_regular_file() || entry.path().extension() != ".sql") continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    migrations.push_back(MakeMigration(entry.path().filename().string(), text.str()));
  }
  return SortedMigrationSet(std::move(migrations));
}

int EmbeddedSchemaVersion() {
  const auto& all = EmbeddedMigrations();
  return all.empty() ? 0 : all.back().version;
}

Migrator::Migrator(std::string database_url, std::vector<Migration> migrations, MigratorOptions options)
    : database_url_(std::move(database_url)),
      migrations_(SortedMigrationSet(std::move(migrations))),
      options_(std::move(options)) {
  CheckedLedger(options_.ledger);
}

std::vector<int> Migrator::Up() {
  auto conn = Connect(database_url_);
  std::vector<int> applied_now;
  {
    // Session-level lock: held across the per-migration transactions below, released on return
    // (or by the server when this connection dies), so a crashed run never blocks the next one.
    pqxx::nontransaction lock(conn);
    lock.exec1("SELECT pg_advisory_lock(" + std::to_string(kMigrationLockKey) + ")");
    lock.exec0(CreateLedgerSql(options_.ledger));
  }
  const auto applied = ReadApplied(conn, options_.ledger);
  VerifyChecksums(migrations_, applied);
  for (const auto& m : Pending(migrations_, applied)) {
    const auto started = std::chrono::steady_clock::now();
    try {
      pqxx::work tx(conn);
      tx.exec0("SET LOCAL lock_timeout = '" + std::to_string(options_.lock_timeout.count()) + "ms'");
      tx.exec(m.sql);
      const auto elapsed_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::steady_clock::now() - started)
                                  .count();
      tx.exec_params0("INSERT INTO " + options_.ledger +
                          " (version, name, checksum, execution_ms) VALUES ($1, $2, $3, $4)",
                      m.version, m.name, m.Checksum(), static_cast<int>(elapsed_ms));
      tx.commit();
    } catch (const pqxx::broken_connection& e) {
      throw MigrationError(MigrationErrc::kDatabaseUnavailable,
                           "lost the database connection while applying " + m.name + ": " + e.what());
    } catch (const pqxx::sql_error& e) {
      throw MigrationError(MigrationErrc::kMigrationFailed,
                           "migration " + m.name + " failed and was rolled back: " + e.what());
    }
    applied_now.push_back(m.version);
  }
  pqxx::nontransaction unlock(conn);
  unlock.exec1("SELECT pg_advisory_unlock(" + std::to_string(kMigrationLockKey) + ")");
  return applied_now;
}

MigrationStatus Migrator::Status() {
  auto conn = Connect(database_url_);
  const auto applied = ReadApplied(conn, options_.ledger);
  VerifyChecksums(migrations_, applied);
  MigrationStatus status;
  for (const auto& [version, m] : applied) status.applied.push_back(m);
  status.current_version = applied.empty() ? 0 : applied.rbegin()->first;
  status.pending = Pending(migrations_, applied);
  return status;
}

int RequireSchemaVersion(const std::string& database_url, int required_version, const SchemaCheck& check) {
  auto conn = Connect(database_url);
  const auto applied = ReadApplied(conn, CheckedLedger(check.ledger));
  const int current = applied.empty() ? 0 : applied.rbegin()->first;
  if (current < required_version) {
    throw MigrationError(MigrationErrc::kSchemaBehind,
                         "database schema (" + check.ledger + ") is at version " + std::to_string(current) +
                             " but this build needs " + std::to_string(required_version) + "; run `" +
                             check.migrate_command + "` first");
  }
  return current;
}

}  // namespace charge_outbox::db
