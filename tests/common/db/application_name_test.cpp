// WithApplicationName: the name is added in the form of the URL it is added to.
#include <gtest/gtest.h>

#include "charge_outbox/db/database.hpp"

namespace charge_outbox::db {
namespace {

TEST(WithApplicationName, AQueryParameterOfAUri) {
  EXPECT_EQ(WithApplicationName("postgresql://u@h:5432/d", "charge-api"),
            "postgresql://u@h:5432/d?application_name=charge-api");
  EXPECT_EQ(WithApplicationName("postgres://u@h/d?sslmode=require", "outbox-relay"),
            "postgres://u@h/d?sslmode=require&application_name=outbox-relay");
  EXPECT_EQ(WithApplicationName("postgresql://h/d", "a b&c"), "postgresql://h/d?application_name=a%20b%26c");
}

TEST(WithApplicationName, AQuotedKeywordOfAKeywordValueString) {
  EXPECT_EQ(WithApplicationName("host=db user=charge dbname=charges", "charge-api"),
            "host=db user=charge dbname=charges application_name='charge-api'");
  EXPECT_EQ(WithApplicationName("host=db", "it's\\x"), "host=db application_name='it\\'s\\\\x'");
  // An empty DATABASE_URL means libpq's defaults (PGHOST...): still keyword/value.
  EXPECT_EQ(WithApplicationName("", "reconciler"), "application_name='reconciler'");
}

TEST(WithApplicationName, NoNameLeavesTheUrlAlone) {
  EXPECT_EQ(WithApplicationName("host=db", ""), "host=db");
  EXPECT_EQ(WithApplicationName("postgresql://h/d", ""), "postgresql://h/d");
}

}  // namespace
}  // namespace charge_outbox::db
