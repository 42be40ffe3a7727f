// A throwaway PostgreSQL database for one test suite, created on the test server and dropped at the end.
#pragma once

#include <memory>
#include <string>

namespace charge_outbox::testing {

class PgTestDatabase {
 public:
  enum class Schema { kEmpty, kMigrated };

  // Creates a fresh database named after `suite`; kMigrated applies every embedded migration.
  static std::unique_ptr<PgTestDatabase> Create(const std::string& suite, Schema schema);
  ~PgTestDatabase();

  PgTestDatabase(const PgTestDatabase&) = delete;
  PgTestDatabase& operator=(const PgTestDatabase&) = delete;

  const std::string& url() const { return url_; }
  const std::string& name() const { return name_; }

  // Runs one SQL statement (no parameters) and returns the first column of the first row as text,
  // or "" when there is no row or it is NULL. For assertions in tests only.
  std::string Scalar(const std::string& sql) const;
  void Execute(const std::string& sql) const;
  // On the server's admin database: for statements about this database itself (ALTER DATABASE, ...).
  void ExecuteAsAdmin(const std::string& sql) const;

 private:
  PgTestDatabase(std::string admin_url, std::string name, std::string url);
  std::string admin_url_;
  std::string name_;
  std::string url_;
};

// The URL of database `db` on the server of `admin_url` (same host, port and user).
std::string WithDatabase(const std::string& admin_url, const std::string& db);

}  // namespace charge_outbox::testing
