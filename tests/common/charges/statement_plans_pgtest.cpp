// How PostgreSQL runs the charge stores' statements on a table shaped like production's: many charges,
// few of them pending. A statement that names one charge by id must find it through the primary key,
// never by reading the partial index of pending charges, whose dead entries a long snapshot elsewhere
// keeps (charge_sql.hpp, STILL_PENDING); one that searches the pending charges reads only the part of that
// index it needs.
#include <gtest/gtest.h>

#include <pqxx/pqxx>

#include <string>
#include <vector>

#include "charge_outbox/charges/charge_store.hpp"
#include "charge_outbox/charges/reconciliation_store.hpp"
#include "charge_outbox/charges/review_store.hpp"
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
  for (const auto& s : PgReviewStoreStatements()) statements.push_back(s);
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

// The reconciler gives back its unworked claims at the end of every run. Its charges are all older than
// the grace period, and the pending index's young end holds the charges being written right now (and
// those just settled, until vacuum: tens of thousands at production's rate), which the statement must not
// walk (it did: 72 ms a run at 2,000 charges/s, measured 4 December).
TEST(ChargeStorePlansTest, GivingBackTheReconcilersClaimsReadsOnlyThePendingIndexsOldEnd) {
  auto db = PgTestDatabase::Create("ChargeStorePlansTest", PgTestDatabase::Schema::kMigrated);
  db->Execute("INSERT INTO merchants (id, name) VALUES ('00000000-0000-4000-8000-00000000000a', 'a')");
  db->Execute(
      "INSERT INTO charges (id, merchant_id, idempotency_key, request_fingerprint, order_id, amount, currency,"
      " payment_method, created_at)"
      " SELECT gen_random_uuid(), '00000000-0000-4000-8000-00000000000a', 'key-' || i, sha256(('fp' || i)::bytea),"
      " 'PED-' || i, 1000, 'BRL', 'pm_tok_visa', now() - i * interval '1 millisecond'"
      " FROM generate_series(1, 20000) AS i");
  db->Execute("VACUUM ANALYZE charges");

  std::string release;
  for (const auto& [name, sql] : PgReconciliationStoreStatements()) {
    if (name == std::string("reconciler_release_all")) release = sql;
  }
  ASSERT_FALSE(release.empty());
  pqxx::connection conn(db->url());
  const auto plan = GenericPlan(conn, release);
  EXPECT_NE(plan.find("charges_pending_created"), std::string::npos) << plan;
  EXPECT_NE(plan.find("Index Cond: (created_at <"), std::string::npos) << plan;
}

}  // namespace
}  // namespace charge_outbox::charges
