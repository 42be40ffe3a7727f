// How PostgreSQL runs the charge stores' statements on a table shaped like production's: many charges,
// few of them pending. A statement that names one charge by id must find it through the primary key,
// never by reading the partial index of pending charges, whose dead entries a long snapshot elsewhere
// keeps (charge_sql.hpp, STILL_PENDING).
#include <gtest/gtest.h>

#include <pqxx/pqxx>

#include <string>
#include <vector>

#include "charge_outbox/charges/charge_store.hpp"
#include "charge_outbox/charges/reconciliation_store.hpp"
#include "pg_test_database.hpp"

namespace charge_outbox::charges {
namespace {

using testing::PgTestDatabase;

// The generic plan of `sql` (as the pool runs a statement after its first executions): its EXPLAIN text.
std::string GenericPlan(pqxx::connection& conn, const std::string& sql) {
  pqxx::work tx(conn);
  tx.exec("SET LOCAL plan_cache_mode = force_generic_plan");
  tx.exec("PREPARE under_test AS " + sql);
  const auto parameters =
      tx.exec1("SELECT cardinality(parameter_types) FROM pg_prepared_statements WHERE name = 'under_test'")[0]
          .as<int>();
  std::string nulls;
  for (int i = 0; i < parameters; ++i) nulls += (i == 0 ? "NULL" : ", NULL");
  std::string plan;
  for (const auto& row : tx.exec("EXPLAIN EXECUTE under_test" + (parameters > 0 ? "(" + nulls + ")" : ""))) {
    plan += row[0].as<std::string>() + "\n";
  }
  tx.exec("DEALLOCATE under_test");
  tx.commit();
  return plan;
}

TEST(ChargeStorePlansTest, AStatementThatNamesOneChargeFindsItThroughThePrimaryKey) {
  auto db = PgTestDatabase::Create("ChargeStorePlansTest", PgTestDatabase::Schema::kMigrated);
  db->Execute("INSERT INTO merchants (id, name) VALUES ('00000000-0000-4000-8000-00000000000a', 'a')");
  // 20,000 settled charges, vacuumed at a quiet moment when none was pending: the pending index then
  // counts no entry, which is what made the planner prefer it (measured on a bench database).
  db->Execute(
      "INSERT INTO charges (id, merchant_id, idempotency_key, request_fingerprint, order_id, amount, currency,"
      " payment_method, status)"
      " SELECT gen_random_uuid(), '00000000-0000-4000-8000-00000000000a', 'key-' || i, sha256(('fp' || i)::bytea),"
      " 'PED-' || i, 1000, 'BRL', 'pm_tok_visa', 'captured'"
      " FROM generate_series(1, 20000) AS i");
  db->Execute("VACUUM ANALYZE charges");

  std::vector<StatementText> statements = PgChargeStoreStatements();
  for (const auto& s : PgReconciliationStoreStatements()) statements.push_back(s);
  pqxx::connection conn(db->url());
  int by_id = 0;
  for (const auto& [name, sql] : statements) {
    const std::string text(sql);
    const bool names_one_charge = text.find("c.id = $1") != std::string::npos ||
                                  text.find("WHERE id = $1") != std::string::npos;
    if (!names_one_charge) continue;
    ++by_id;
    const auto plan = GenericPlan(conn, text);
    EXPECT_EQ(plan.find("charges_pending_created"), std::string::npos) << name << ":\n" << plan;
    EXPECT_NE(plan.find("charges_pkey"), std::string::npos) << name << ":\n" << plan;
  }
  EXPECT_GE(by_id, 5);  // take-over, complete, renew, release, reschedule at least
}

}  // namespace
}  // namespace charge_outbox::charges
