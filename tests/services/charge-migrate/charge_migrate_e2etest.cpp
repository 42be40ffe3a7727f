// charge-migrate run as the Helm hook Job runs it: a process, a config file, an environment.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "child_process.hpp"
#include "pg_test_database.hpp"
#include "test_env.hpp"

namespace charge_outbox::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr int kExitConfigError = 2;

class ChargeMigrateE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = PgTestDatabase::Create(::testing::UnitTest::GetInstance()->current_test_info()->name(),
                                 PgTestDatabase::Schema::kEmpty);
    dir_ = fs::temp_directory_path() / UniqueName("charge_migrate_e2e");
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string WriteFile(const std::string& name, const std::string& text) {
    const auto path = dir_ / name;
    std::ofstream(path) << text;
    return path.string();
  }

  ProcessResult Migrate(std::vector<std::string> args, EnvChanges env = {}) {
    args.insert(args.begin(), CHARGE_MIGRATE_BIN);
    if (!env.contains("DATABASE_URL")) env["DATABASE_URL"] = db_->url();
    return RunProcess(args, env);
  }

  std::unique_ptr<PgTestDatabase> db_;
  fs::path dir_;
};

TEST_F(ChargeMigrateE2E, UpAppliesEverythingThenStatusShowsTheVersion) {
  const auto up = Migrate({"up"});
  ASSERT_EQ(up.exit_code, 0) << up.out << up.err;
  EXPECT_THAT(up.out, HasSubstr(R"("component":"charge-migrate")"));
  const auto again = Migrate({"up"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_THAT(again.out, HasSubstr("0 migration(s) applied by this run"));
  const auto status = Migrate({"status"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_THAT(status.out, HasSubstr("applied  0001_core"));
}

TEST_F(ChargeMigrateE2E, MissingDatabaseUrlExitsTwoNamingTheKey) {
  const auto r = Migrate({"up"}, {{"DATABASE_URL", std::nullopt}});
  EXPECT_EQ(r.exit_code, kExitConfigError);
  EXPECT_THAT(r.err, HasSubstr("database.url"));
  EXPECT_THAT(r.err, HasSubstr("DATABASE_URL"));
  EXPECT_EQ(db_->Scalar("SELECT to_regclass('schema_migrations')::text"), "");
}

TEST_F(ChargeMigrateE2E, WronglyTypedValueExitsTwoNamingTheKey) {
  const auto config = WriteFile("m.yaml", "migrate:\n  lock_timeout: soon\n");
  const auto r = Migrate({"--config", config, "up"});
  EXPECT_EQ(r.exit_code, kExitConfigError);
  EXPECT_THAT(r.err, HasSubstr("config error: migrate.lock_timeout: expected a duration"));
  EXPECT_EQ(db_->Scalar("SELECT to_regclass('schema_migrations')::text"), "");
}

TEST_F(ChargeMigrateE2E, WronglyTypedEnvironmentOverrideExitsTwo) {
  const auto r = Migrate({"up"}, {{"MIGRATE_LOCK_TIMEOUT", "10"}});
  EXPECT_EQ(r.exit_code, kExitConfigError);
  EXPECT_THAT(r.err, HasSubstr("migrate.lock_timeout"));
}

TEST_F(ChargeMigrateE2E, UnknownKeyAndBadCommandExitTwo) {
  const auto config = WriteFile("m.yaml", "migrate:\n  lock_timout: 5s\n");
  const auto typo = Migrate({"--config", config, "up"});
  EXPECT_EQ(typo.exit_code, kExitConfigError);
  EXPECT_THAT(typo.err, HasSubstr("migrate.lock_timout: unknown key"));
  const auto bad = Migrate({"sideways"});
  EXPECT_EQ(bad.exit_code, kExitConfigError);
  EXPECT_THAT(bad.err, HasSubstr("usage: charge-migrate"));
}

TEST_F(ChargeMigrateE2E, EditedAppliedMigrationIsRefusedWithExitOne) {
  const auto sql_dir = dir_ / "sql";
  fs::create_directories(sql_dir);
  fs::copy(SQL_MIGRATIONS_DIR, sql_dir, fs::copy_options::recursive);
  ASSERT_EQ(Migrate({"--migrations-dir", sql_dir.string(), "up"}).exit_code, 0);
  std::ofstream(sql_dir / "0001_core.sql", std::ios::app) << "\n-- an innocent-looking edit\n";
  const auto r = Migrate({"--migrations-dir", sql_dir.string(), "up"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr("never edit an applied migration"));
}

TEST_F(ChargeMigrateE2E, TwoConcurrentProcessesBothSucceedAndApplyOnce) {
  ChildProcess a({CHARGE_MIGRATE_BIN, "up"}, {{"DATABASE_URL", db_->url()}});
  ChildProcess b({CHARGE_MIGRATE_BIN, "up"}, {{"DATABASE_URL", db_->url()}});
  const auto ra = a.Wait(std::chrono::seconds{60});
  const auto rb = b.Wait(std::chrono::seconds{60});
  EXPECT_EQ(ra.exit_code, 0) << ra.out;
  EXPECT_EQ(rb.exit_code, 0) << rb.out;
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM schema_migrations"), db_->Scalar("SELECT max(version) FROM schema_migrations"));
}

TEST_F(ChargeMigrateE2E, UnreachableDatabaseExitsOneWithAHint) {
  const auto r = Migrate({"up"}, {{"DATABASE_URL", "postgresql://postgres@127.0.0.1:1/x?connect_timeout=2"}});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr("check DATABASE_URL"));
}

}  // namespace
}  // namespace charge_outbox::testing
