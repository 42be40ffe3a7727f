// db::TextArray, the array literal the inbox and its handlers pass as one parameter: PostgreSQL reads it
// back as exactly the strings it was made from, whatever characters they hold.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <pqxx/pqxx>

#include <string>
#include <vector>

#include "charge_outbox/db/text_query.hpp"
#include "test_env.hpp"

namespace charge_outbox::db {
namespace {

using ::testing::ElementsAreArray;
using ::testing::IsEmpty;

std::vector<std::string> RoundTrip(const std::vector<std::string>& values) {
  pqxx::connection conn(testing::TestDatabaseAdminUrl());
  pqxx::nontransaction tx(conn);
  std::vector<std::string> out;
  for (const auto& row : tx.exec_params("SELECT v FROM unnest($1::text[]) WITH ORDINALITY AS u(v, n) ORDER BY n",
                                        TextArray(values))) {
    EXPECT_FALSE(row[0].is_null());
    out.push_back(row[0].is_null() ? "<NULL>" : row[0].as<std::string>());
  }
  return out;
}

TEST(InboxTextArrayTest, EveryStringComesBackAsItWas) {
  const std::vector<std::string> values{
      "plain", "with \"quotes\"", "back\\slash", "\\", "\"", "a,b", "{braces}", "}", "{", "", "NULL", "null",
      " leading and trailing ", "'single'", "tab\there", "new\nline", "\\\"", "{\"a\",\"b\"}", "é ü 漢字",
      "ends with backslash\\"};
  EXPECT_THAT(RoundTrip(values), ElementsAreArray(values));
}

TEST(InboxTextArrayTest, EmptyStringsAndEmptyArrays) {
  EXPECT_THAT(RoundTrip({}), IsEmpty());
  EXPECT_THAT(RoundTrip({""}), ElementsAreArray(std::vector<std::string>{""}));
  EXPECT_THAT(RoundTrip({"", ""}), ElementsAreArray(std::vector<std::string>{"", ""}));
}

TEST(InboxTextArrayTest, NumbersCastToTheirArrayTypes) {
  pqxx::connection conn(testing::TestDatabaseAdminUrl());
  pqxx::nontransaction tx(conn);
  const auto sum = tx.exec_params1("SELECT sum(v) FROM unnest($1::bigint[]) AS v",
                                   TextArray({"1", "-2", "9223372036854775000"}))[0]
                       .as<std::int64_t>();
  EXPECT_EQ(sum, 9223372036854774999);
}

}  // namespace
}  // namespace charge_outbox::db
