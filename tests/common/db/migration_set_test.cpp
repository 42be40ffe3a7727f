#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "charge_outbox/db/migrations.hpp"

namespace charge_outbox::db {
namespace {

using ::testing::HasSubstr;

MigrationErrc CodeOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const MigrationError& e) {
    return e.code();
  }
  ADD_FAILURE() << "expected a MigrationError";
  return MigrationErrc::kMigrationFailed;
}

TEST(MakeMigration, ParsesVersionAndName) {
  const auto m = MakeMigration("0012_add_index.sql", "SELECT 1;");
  EXPECT_EQ(m.version, 12);
  EXPECT_EQ(m.name, "0012_add_index");
  EXPECT_EQ(m.Checksum().size(), 64u);
}

TEST(MakeMigration, RefusesBadNames) {
  for (const char* bad : {"12_x.sql", "0001-core.sql", "0001_Core.sql", "0001_core.txt", "0000_zero.sql"}) {
    EXPECT_EQ(CodeOf([&] { MakeMigration(bad, ""); }), MigrationErrc::kInvalidMigrationSet) << bad;
  }
}

TEST(SortedMigrationSet, SortsAndRefusesDuplicateVersions) {
  const auto sorted = SortedMigrationSet({MakeMigration("0002_b.sql", ""), MakeMigration("0001_a.sql", "")});
  ASSERT_EQ(sorted.size(), 2u);
  EXPECT_EQ(sorted[0].version, 1);
  EXPECT_EQ(CodeOf([] { SortedMigrationSet({MakeMigration("0001_a.sql", ""), MakeMigration("0001_b.sql", "")}); }),
            MigrationErrc::kInvalidMigrationSet);
}

TEST(EmbeddedMigrations, StartAtOneWithoutGapsAndMatchTheVersion) {
  const auto& all = EmbeddedMigrations();
  ASSERT_FALSE(all.empty());
  for (std::size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i].version, static_cast<int>(i) + 1);
  EXPECT_EQ(EmbeddedSchemaVersion(), all.back().version);
  EXPECT_THAT(all.front().sql, HasSubstr("CREATE TABLE charges"));
}

TEST(Checksum, ChangesWithOneCharacter) {
  EXPECT_NE(MakeMigration("0001_a.sql", "SELECT 1;").Checksum(), MakeMigration("0001_a.sql", "SELECT 2;").Checksum());
}

}  // namespace
}  // namespace charge_outbox::db
