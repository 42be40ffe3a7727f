// Schema migrations: the ordered SQL files of sql/migrations, applied under an advisory lock.
//
// A migration is `NNNN_name.sql`; version NNNN. Each is applied in its own transaction and
// recorded in `schema_migrations` with the SHA-256 of its text. Re-running is a no-op; an applied
// migration whose text changed is refused, because the database no longer matches what the code
// says it is. Concurrent runs serialise on a session advisory lock, so each migration is applied
// exactly once however many Jobs start at the same moment.
#pragma once

#include <chrono>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace charge_outbox::db {

struct Migration {
  int version = 0;
  std::string name;  // "0001_core"
  std::string sql;
  std::string Checksum() const;  // hex SHA-256 of `sql`
};

enum class MigrationErrc {
  kDatabaseUnavailable,  // cannot connect: retry later
  kInvalidMigrationSet,  // bad file name, duplicate version: fix the files
  kChecksumMismatch,     // an applied migration was edited: restore it, add a new migration instead
  kOutOfOrder,           // a pending migration is older than one already applied
  kMigrationFailed,      // the SQL of one migration failed; its transaction was rolled back
  kSchemaBehind,         // a daemon found an older schema than it was built for: run `charge-migrate up`
};

class MigrationError : public std::runtime_error {
 public:
  MigrationError(MigrationErrc code, const std::string& message) : std::runtime_error(message), code_(code) {}
  MigrationErrc code() const noexcept { return code_; }

 private:
  MigrationErrc code_;
};

// Parses "NNNN_name.sql" and validates the set (sorted, no duplicate versions).
Migration MakeMigration(const std::string& file_name, std::string sql);
std::vector<Migration> SortedMigrationSet(std::vector<Migration> migrations);
std::vector<Migration> LoadMigrationsFromDirectory(const std::filesystem::path& dir);

// The migrations compiled into this binary from sql/migrations, and the schema version they reach.
const std::vector<Migration>& EmbeddedMigrations();
int EmbeddedSchemaVersion();

struct AppliedMigration {
  int version = 0;
  std::string name;
  std::string checksum;
  std::string applied_at;
};

struct MigrationStatus {
  std::vector<AppliedMigration> applied;
  std::vector<Migration> pending;
  int current_version = 0;  // highest applied version, 0 for an empty database
};

struct MigratorOptions {
  // How long one migration's DDL may wait for a table lock before it fails (and the Job retries),
  // rather than queueing every application query behind it.
  std::chrono::milliseconds lock_timeout{std::chrono::seconds{30}};
  // The table that records what was applied. One per owner of a set of tables: a consumer's database
  // holds the inbox library's migrations and the consumer's own, each with its history.
  std::string ledger = "schema_migrations";
};

// Not thread-safe; one Migrator per run. Opens its own connection per call.
class Migrator {
 public:
  Migrator(std::string database_url, std::vector<Migration> migrations, MigratorOptions options = {});

  // Applies every pending migration; returns the versions this call applied (empty: nothing to do).
  std::vector<int> Up();
  MigrationStatus Status();

 private:
  std::string database_url_;
  std::vector<Migration> migrations_;
  MigratorOptions options_;
};

// Daemons call this at start: the schema must be at least `required_version`. A newer schema is
// accepted, because migrations are additive (expand first, contract in a later release) and pods of
// the previous release keep running while a rollout applies the next one.
// Returns the current version.
struct SchemaCheck {
  std::string ledger = "schema_migrations";
  std::string migrate_command = "charge-migrate up";  // named in the error
};
int RequireSchemaVersion(const std::string& database_url, int required_version, const SchemaCheck& check = {});

}  // namespace charge_outbox::db
