// The pool's repeat rule (db/repeat_rule.hpp): which failed jobs run again on a fresh connection. Only
// what provably did nothing on the server, or what its caller marked idempotent; never a commit in doubt.
#include "db/repeat_rule.hpp"

#include <gtest/gtest.h>

#include <pqxx/pqxx>

#include <stdexcept>

namespace charge_outbox::db {
namespace {

template <typename E>
std::exception_ptr Thrown(E e) {
  return std::make_exception_ptr(std::move(e));
}

pqxx::sql_error Refused(const char* sqlstate) { return pqxx::sql_error("refused", "a statement", sqlstate); }

TEST(PgRepeatRule, AConnectionLostBeforeAnyStatementWasSentRunsAgainWhateverTheJob) {
  const auto what = ClassifyJobFailure(Thrown(pqxx::broken_connection("gone")), false, false, false);
  EXPECT_EQ(what, JobFailure::kLostBeforeSending);
  EXPECT_TRUE(MayRunAgain(what, Repeat::kIfNotSent));
  EXPECT_TRUE(MayRunAgain(what, Repeat::kIdempotent));
}

TEST(PgRepeatRule, AConnectionLostWithAStatementSentRunsAgainOnlyWhenIdempotent) {
  const auto what = ClassifyJobFailure(Thrown(pqxx::broken_connection("gone")), true, false, false);
  EXPECT_EQ(what, JobFailure::kLostAfterSending);
  EXPECT_FALSE(MayRunAgain(what, Repeat::kIfNotSent)) << "a write in flight may have committed";
  EXPECT_TRUE(MayRunAgain(what, Repeat::kIdempotent));
}

TEST(PgRepeatRule, ACommitInFlightNeverRunsAgain) {
  // What the job says when its connection died during COMMIT (or an autocommit write): the outcome is
  // unknown, and the caller's answer says so. Sent or not, idempotent or not.
  for (const bool sent : {false, true}) {
    const auto what = ClassifyJobFailure(Thrown(pqxx::in_doubt_error("lost during COMMIT")), sent, false, false);
    EXPECT_EQ(what, JobFailure::kCommitInDoubt);
    EXPECT_FALSE(MayRunAgain(what, Repeat::kIfNotSent));
    EXPECT_FALSE(MayRunAgain(what, Repeat::kIdempotent));
  }
}

TEST(PgRepeatRule, AStandbysRefusalRunsAgainButAReadOnlyTransactionsDoesNot) {
  const auto standby = ClassifyJobFailure(Thrown(Refused("25006")), true, false, true);
  EXPECT_EQ(standby, JobFailure::kReadOnlyServer);
  EXPECT_TRUE(MayRunAgain(standby, Repeat::kIfNotSent)) << "a read-only server wrote nothing";
  // The same SQLSTATE from a primary: a write inside our own READ ONLY transaction, the job's mistake.
  const auto own = ClassifyJobFailure(Thrown(Refused("25006")), true, false, false);
  EXPECT_EQ(own, JobFailure::kRefused);
  EXPECT_FALSE(MayRunAgain(own, Repeat::kIdempotent));
}

TEST(PgRepeatRule, AStatementTheServerRefusedDoesNotRunAgain) {
  for (const char* state : {"23505", "42703", "57014", "40001"}) {
    const auto what = ClassifyJobFailure(Thrown(Refused(state)), true, false, true);
    EXPECT_EQ(what, JobFailure::kRefused) << state;
    EXPECT_FALSE(MayRunAgain(what, Repeat::kIdempotent)) << state;
  }
  const auto own = ClassifyJobFailure(Thrown(std::runtime_error("the job's own")), false, false, false);
  EXPECT_EQ(own, JobFailure::kRefused);
  EXPECT_FALSE(MayRunAgain(own, Repeat::kIdempotent));
}

TEST(PgRepeatRule, ACallCutByItsDeadlineDoesNotRunAgain) {
  // Its time is spent: a second run would make the caller wait past database.call_timeout.
  const auto what = ClassifyJobFailure(Thrown(pqxx::broken_connection("shut down")), false, true, false);
  EXPECT_EQ(what, JobFailure::kPastDeadline);
  EXPECT_FALSE(MayRunAgain(what, Repeat::kIdempotent));
}

}  // namespace
}  // namespace charge_outbox::db
