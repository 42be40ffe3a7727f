// Migrations against a real PostgreSQL: each test gets its own empty database.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <pqxx/pqxx>

#include <future>

#include "charge_outbox/db/migrations.hpp"
#include "pg_test_database.hpp"

namespace charge_outbox::db {
namespace {

using testing::PgTestDatabase;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<Migration> TwoMigrations() {
  return {MakeMigration("0001_first.sql", "CREATE TABLE first_table (id int PRIMARY KEY);"),
          MakeMigration("0002_second.sql", "ALTER TABLE first_table ADD COLUMN note text;")};
}

MigrationError ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const MigrationError& e) {
    return e;
  }
  ADD_FAILURE() << "expected a MigrationError";
  return MigrationError(MigrationErrc::kMigrationFailed, "");
}

class MigrationsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = PgTestDatabase::Create(::testing::UnitTest::GetInstance()->current_test_info()->name(),
                                 PgTestDatabase::Schema::kEmpty);
  }
  std::unique_ptr<PgTestDatabase> db_;
};

TEST_F(MigrationsTest, EmptyDatabaseGetsEveryMigration) {
  Migrator migrator(db_->url(), TwoMigrations());
  EXPECT_THAT(migrator.Up(), ElementsAre(1, 2));
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM schema_migrations"), "2");
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM information_schema.columns WHERE column_name = 'note'"), "1");
  const auto status = migrator.Status();
  EXPECT_EQ(status.current_version, 2);
  EXPECT_TRUE(status.pending.empty());
}

TEST_F(MigrationsTest, SecondRunIsANoOp) {
  Migrator(db_->url(), TwoMigrations()).Up();
  const auto applied_at = db_->Scalar("SELECT max(applied_at)::text FROM schema_migrations");
  EXPECT_TRUE(Migrator(db_->url(), TwoMigrations()).Up().empty());
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM schema_migrations"), "2");
  EXPECT_EQ(db_->Scalar("SELECT max(applied_at)::text FROM schema_migrations"), applied_at);
}

TEST_F(MigrationsTest, OnlyNewMigrationsAreAppliedLater) {
  auto migrations = TwoMigrations();
  Migrator(db_->url(), {migrations[0]}).Up();
  Migrator migrator(db_->url(), migrations);
  ASSERT_EQ(migrator.Status().pending.size(), 1u);
  EXPECT_THAT(migrator.Up(), ElementsAre(2));
}

TEST_F(MigrationsTest, EditedAppliedMigrationIsRefused) {
  Migrator(db_->url(), TwoMigrations()).Up();
  auto edited = TwoMigrations();
  edited[0].sql = "CREATE TABLE first_table (id bigint PRIMARY KEY);";
  const auto e = ErrorOf([&] { Migrator(db_->url(), edited).Up(); });
  EXPECT_EQ(e.code(), MigrationErrc::kChecksumMismatch);
  EXPECT_THAT(e.what(), HasSubstr("0001_first"));
  EXPECT_EQ(ErrorOf([&] { Migrator(db_->url(), edited).Status(); }).code(), MigrationErrc::kChecksumMismatch);
}

TEST_F(MigrationsTest, FailingMigrationIsRolledBackWhole) {
  std::vector<Migration> bad = {
      MakeMigration("0001_half.sql", "CREATE TABLE half_done (id int); SELECT no_such_column FROM half_done;")};
  const auto e = ErrorOf([&] { Migrator(db_->url(), bad).Up(); });
  EXPECT_EQ(e.code(), MigrationErrc::kMigrationFailed);
  EXPECT_EQ(db_->Scalar("SELECT to_regclass('half_done')::text"), "");
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM schema_migrations"), "0");
}

TEST_F(MigrationsTest, OlderPendingMigrationIsRefusedAsOutOfOrder) {
  Migrator(db_->url(), {MakeMigration("0002_second.sql", "SELECT 1;")}).Up();
  const auto e = ErrorOf([&] {
    Migrator(db_->url(), {MakeMigration("0001_first.sql", "SELECT 1;"), MakeMigration("0002_second.sql", "SELECT 1;")})
        .Up();
  });
  EXPECT_EQ(e.code(), MigrationErrc::kOutOfOrder);
}

TEST_F(MigrationsTest, ConcurrentRunsBothSucceedAndApplyOnce) {
  // Slow first migration so the second runner really arrives while the first holds the lock.
  std::vector<Migration> migrations = {
      MakeMigration("0001_slow.sql", "SELECT pg_sleep(0.5); CREATE TABLE slow_table (id int);"),
      MakeMigration("0002_counter.sql", "CREATE TABLE applied_counter (n int); INSERT INTO applied_counter VALUES (1);")};
  auto run = [&] { return Migrator(db_->url(), migrations).Up(); };
  auto a = std::async(std::launch::async, run);
  auto b = std::async(std::launch::async, run);
  const auto applied_a = a.get();
  const auto applied_b = b.get();
  EXPECT_EQ(applied_a.size() + applied_b.size(), 2u);
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM applied_counter"), "1");
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM schema_migrations"), "2");
}

TEST_F(MigrationsTest, RequireSchemaVersionRefusesAnOlderSchema) {
  EXPECT_EQ(ErrorOf([&] { RequireSchemaVersion(db_->url(), 1); }).code(), MigrationErrc::kSchemaBehind);
  Migrator(db_->url(), TwoMigrations()).Up();
  EXPECT_EQ(RequireSchemaVersion(db_->url(), 2), 2);
  EXPECT_EQ(RequireSchemaVersion(db_->url(), 1), 2);  // newer schema: accepted during a rollout
  EXPECT_EQ(ErrorOf([&] { RequireSchemaVersion(db_->url(), 3); }).code(), MigrationErrc::kSchemaBehind);
}

TEST_F(MigrationsTest, UnreachableDatabaseIsReportedAsSuch) {
  const auto e = ErrorOf([] { Migrator("postgresql://postgres@127.0.0.1:1/none?connect_timeout=2", TwoMigrations()).Up(); });
  EXPECT_EQ(e.code(), MigrationErrc::kDatabaseUnavailable);
}

TEST_F(MigrationsTest, EmbeddedSchemaAppliesAndCreatesTodaysOutboxPartition) {
  EXPECT_FALSE(Migrator(db_->url(), EmbeddedMigrations()).Up().empty());
  EXPECT_EQ(RequireSchemaVersion(db_->url(), EmbeddedSchemaVersion()), EmbeddedSchemaVersion());
  // An event written now lands in a daily partition, not the default one.
  db_->Execute("INSERT INTO merchants (id, name) VALUES ('00000000-0000-0000-0000-000000000001', 'm')");
  db_->Execute(
      "INSERT INTO outbox (id, aggregateid, type, payload, sequence, shard) "
      "VALUES (gen_random_uuid(), 'c1', 'payments.charge.initiated.v1', '{}', 1, 0)");
  EXPECT_EQ(db_->Scalar("SELECT tableoid::regclass::text FROM outbox"),
            db_->Scalar("SELECT 'outbox_' || to_char(now() AT TIME ZONE 'UTC', 'YYYYMMDD')"));
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM outbox_default"), "0");
}

// 0012 was edited after it shipped, because PostgreSQL 15.20 refused its ALTER TABLE while 0007's
// function used the row type: a database that applied the earlier text is as migrated and still starts;
// any other text under that name is still an edit, refused.
TEST_F(MigrationsTest, ADatabaseThatAppliedTheEarlierTextOfAnEditedMigrationIsAccepted) {
  Migrator(db_->url(), EmbeddedMigrations()).Up();
  db_->Execute(
      "UPDATE schema_migrations SET checksum = '5c523a74da9d6fc34c7541fa67ff935de4d4676ccd0adc6fe1e4e36fb29d5d70' "
      "WHERE version = 12");
  EXPECT_TRUE(Migrator(db_->url(), EmbeddedMigrations()).Status().pending.empty());
  EXPECT_EQ(RequireSchemaVersion(db_->url(), EmbeddedSchemaVersion()), EmbeddedSchemaVersion());
  db_->Execute("UPDATE schema_migrations SET checksum = repeat('0', 64) WHERE version = 12");
  EXPECT_EQ(ErrorOf([&] { Migrator(db_->url(), EmbeddedMigrations()).Status(); }).code(),
            MigrationErrc::kChecksumMismatch);
}

TEST_F(MigrationsTest, SameIdempotencyKeyIsUniquePerMerchantOnly) {
  Migrator(db_->url(), EmbeddedMigrations()).Up();
  db_->Execute(
      "INSERT INTO merchants (id, name) VALUES ('00000000-0000-0000-0000-000000000001', 'a'), "
      "('00000000-0000-0000-0000-000000000002', 'b')");
  const std::string insert =
      "INSERT INTO charges (id, merchant_id, idempotency_key, request_fingerprint, order_id, amount, currency, "
      "payment_method) VALUES (gen_random_uuid(), '00000000-0000-0000-0000-00000000000";
  const std::string rest = "', 'key-1', sha256('x'), 'PED-1', 100, 'BRL', 'pm_tok_visa')";
  db_->Execute(insert + "1" + rest);
  db_->Execute(insert + "2" + rest);  // another merchant, same key: fine
  try {
    db_->Execute(insert + "1" + rest);
    ADD_FAILURE() << "the same merchant and key were accepted twice";
  } catch (const pqxx::unique_violation& e) {
    EXPECT_THAT(e.what(), HasSubstr("charges_merchant_idempotency_key"));
  }
}

}  // namespace
}  // namespace charge_outbox::db
