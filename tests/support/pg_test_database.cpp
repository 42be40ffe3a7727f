#include "pg_test_database.hpp"

#include <pqxx/pqxx>

#include "charge_outbox/db/migrations.hpp"
#include "test_env.hpp"

namespace charge_outbox::testing {

std::string WithDatabase(const std::string& admin_url, const std::string& db) {
  // postgresql://user@host:port/dbname?params -> replace dbname, keep params.
  const auto scheme_end = admin_url.find("://");
  const auto path_start = admin_url.find('/', scheme_end == std::string::npos ? 0 : scheme_end + 3);
  if (path_start == std::string::npos) return admin_url + "/" + db;
  const auto query = admin_url.find('?', path_start);
  return admin_url.substr(0, path_start + 1) + db + (query == std::string::npos ? "" : admin_url.substr(query));
}

std::unique_ptr<PgTestDatabase> PgTestDatabase::Create(const std::string& suite, Schema schema) {
  const auto admin_url = TestDatabaseAdminUrl();
  const auto name = UniqueName("t_" + suite.substr(0, 30));
  {
    pqxx::connection admin(admin_url);
    pqxx::nontransaction tx(admin);
    tx.exec0("CREATE DATABASE " + tx.quote_name(name));
  }
  std::unique_ptr<PgTestDatabase> db(new PgTestDatabase(admin_url, name, WithDatabase(admin_url, name)));
  if (schema == Schema::kMigrated) {
    db::Migrator(db->url(), db::EmbeddedMigrations()).Up();
  }
  return db;
}

PgTestDatabase::PgTestDatabase(std::string admin_url, std::string name, std::string url)
    : admin_url_(std::move(admin_url)), name_(std::move(name)), url_(std::move(url)) {}

PgTestDatabase::~PgTestDatabase() {
  try {
    pqxx::connection admin(admin_url_);
    pqxx::nontransaction tx(admin);
    tx.exec0("DROP DATABASE IF EXISTS " + tx.quote_name(name_) + " WITH (FORCE)");
  } catch (const std::exception&) {
    // The server is going away with the test run; a leftover database harms nothing.
  }
}

std::string PgTestDatabase::Scalar(const std::string& sql) const {
  pqxx::connection conn(url_);
  pqxx::nontransaction tx(conn);
  const auto result = tx.exec(sql);
  if (result.empty() || result[0][0].is_null()) return "";
  return result[0][0].as<std::string>();
}

void PgTestDatabase::Execute(const std::string& sql) const {
  pqxx::connection conn(url_);
  pqxx::nontransaction tx(conn);
  tx.exec(sql);
}

void PgTestDatabase::ExecuteAsAdmin(const std::string& sql) const {
  pqxx::connection conn(admin_url_);
  pqxx::nontransaction tx(conn);
  tx.exec(sql);
}

}  // namespace charge_outbox::testing
