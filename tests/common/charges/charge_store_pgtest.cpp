// PgChargeStore against a real PostgreSQL with the real schema: the intent and its event in one
// statement, the per-merchant key deciding who is first, leases, takeover, and the conditional
// transition that lets exactly one of two racers win.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include <thread>
#include <vector>

#include "charge_outbox/charges/charge_store.hpp"
#include "charge_outbox/util/sha256.hpp"
#include "await.hpp"
#include "pg_test_database.hpp"

namespace charge_outbox::charges {
namespace {

namespace asio = boost::asio;
using ::testing::HasSubstr;
using testing::Await;
using testing::PgTestDatabase;

constexpr const char* kMerchantA = "00000000-0000-4000-8000-00000000000a";
constexpr const char* kMerchantB = "00000000-0000-4000-8000-00000000000b";

class ChargeStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = PgTestDatabase::Create(::testing::UnitTest::GetInstance()->current_test_info()->name(),
                                 PgTestDatabase::Schema::kMigrated);
    db_->Execute(std::string("INSERT INTO merchants (id, name) VALUES ('") + kMerchantA + "', 'a'), ('" + kMerchantB +
                 "', 'b')");
    database_ = std::make_unique<db::Database>(db_->url(), db::DatabaseOptions{.connections = 4});
    store_ = MakePgChargeStore(*database_);
  }

  static NewCharge Request(const std::string& merchant, const std::string& key, std::int64_t amount = 25000) {
    NewCharge n;
    n.merchant_id = merchant;
    n.idempotency_key = key;
    n.terms.order_id = "PED-0001";
    n.terms.amount = amount;
    n.terms.currency = "BRL";
    n.terms.payment_method = "pm_tok_visa";
    n.terms.description = "cobrança";
    n.traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    n.fingerprint = util::Sha256("fp:" + std::to_string(amount));
    return n;
  }

  // A request id per owner, as charge-api draws one per request: the same request retrying sends the same.
  static std::string FirstRequestId(const std::string& owner) {
    const auto h = util::Sha256Hex(owner);
    return h.substr(0, 8) + "-" + h.substr(8, 4) + "-4" + h.substr(13, 3) + "-8" + h.substr(17, 3) + "-" +
           h.substr(20, 12);
  }

  BeginResult Begin(const NewCharge& n, const std::string& owner, std::chrono::milliseconds lease) {
    const charges::FirstAttempt first{FirstRequestId(owner), acquirer::Operation::kCapture, "charge-api"};
    auto r = Await(store_->Begin(n, {owner, lease}, first));
    EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().detail);
    return *r;
  }

  Transition Captured() {
    Transition t;
    t.to = ChargeStatus::kCaptured;
    t.acquirer_capture_id = "cap_1";
    t.deadline = std::chrono::hours{1};
    t.response_status = 201;
    t.response_body = R"({"status":"captured"})";
    t.traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    return t;
  }

  std::unique_ptr<PgTestDatabase> db_;
  std::unique_ptr<db::Database> database_;
  std::unique_ptr<ChargeStore> store_;
};

TEST_F(ChargeStoreTest, BeginWritesPendingChargeInitiatedEventAndStartedAttempt) {
  const auto r = Begin(Request(kMerchantA, "key-1"), "api-1:r1", std::chrono::seconds{15});
  ASSERT_EQ(r.outcome, BeginOutcome::kCreated);
  EXPECT_EQ(r.attempt_no, 1);
  EXPECT_EQ(r.charge.status, ChargeStatus::kPending);
  EXPECT_EQ(r.charge.last_sequence, 1);
  EXPECT_GT(r.charge.lease_remaining, std::chrono::seconds{14});
  EXPECT_EQ(r.charge.description, "cobrança");

  EXPECT_EQ(db_->Scalar("SELECT type || ' ' || sequence || ' ' || aggregateid FROM outbox"),
            "payments.charge.initiated.v1 1 " + r.charge.public_id());
  EXPECT_EQ(db_->Scalar("SELECT payload->>'status' || ' ' || (payload->>'sequence') || ' ' || (payload->>'amount') "
                        "FROM outbox"),
            "pending 1 25000");
  EXPECT_EQ(db_->Scalar("SELECT payload::jsonb ? 'payment_method' FROM outbox"), "f");
  // Absent fields are left out rather than sent as null.
  EXPECT_EQ(db_->Scalar("SELECT payload::jsonb ? 'acquirer_capture_id' FROM outbox"), "f");
  EXPECT_EQ(db_->Scalar("SELECT shard = outbox_shard(" "'" + r.charge.id + "'::uuid) FROM outbox"), "t");
  EXPECT_EQ(db_->Scalar("SELECT operation || ' ' || actor || ' ' || (finished_at IS NULL) FROM acquirer_attempts"),
            "capture charge-api true");
  EXPECT_EQ(db_->Scalar("SELECT request_id::text FROM acquirer_attempts"), r.first_request_id);
}

TEST_F(ChargeStoreTest, SameKeyIsScopedPerMerchant) {
  EXPECT_EQ(Begin(Request(kMerchantA, "shared"), "o1", std::chrono::seconds{5}).outcome, BeginOutcome::kCreated);
  EXPECT_EQ(Begin(Request(kMerchantB, "shared"), "o2", std::chrono::seconds{5})
                .outcome,
            BeginOutcome::kCreated);
  EXPECT_EQ(db_->Scalar("SELECT count(DISTINCT id) FROM charges"), "2");
}

TEST_F(ChargeStoreTest, SecondBeginSeesLiveOwnerThenMismatchThenTakeover) {
  const auto first = Begin(Request(kMerchantA, "k"), "o1", std::chrono::seconds{30});
  ASSERT_EQ(first.outcome, BeginOutcome::kCreated);

  const auto in_flight = Begin(Request(kMerchantA, "k"), "o2", std::chrono::seconds{30});
  EXPECT_EQ(in_flight.outcome, BeginOutcome::kInFlight);
  EXPECT_EQ(in_flight.charge.id, first.charge.id);
  EXPECT_GT(in_flight.charge.lease_remaining, std::chrono::seconds{25});

  EXPECT_EQ(Begin(Request(kMerchantA, "k", 99), "o3", std::chrono::seconds{30}).outcome,
            BeginOutcome::kFingerprintMismatch);

  db_->Execute("UPDATE charges SET lease_expires_at = now() - interval '1 second'");
  const auto taken = Begin(Request(kMerchantA, "k"), "o4", std::chrono::seconds{30});
  EXPECT_EQ(taken.outcome, BeginOutcome::kTakenOver);
  EXPECT_EQ(taken.charge.owner_id, "o4");
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM outbox"), "1");  // no second initiated event
}

TEST_F(ChargeStoreTest, RetriedBeginOfTheSameOwnerFindsItsOwnRow) {
  ASSERT_EQ(Begin(Request(kMerchantA, "k"), "o1:req", std::chrono::seconds{30}).outcome, BeginOutcome::kCreated);
  const auto again = Begin(Request(kMerchantA, "k"), "o1:req", std::chrono::seconds{30});
  EXPECT_EQ(again.outcome, BeginOutcome::kCreated);
  EXPECT_EQ(again.attempt_no, 1);
  EXPECT_EQ(again.first_request_id, db_->Scalar("SELECT request_id::text FROM acquirer_attempts"));
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM charges"), "1");
}

TEST_F(ChargeStoreTest, CompleteMovesPendingOnceAndAnnouncesIt) {
  const auto begun = Begin(Request(kMerchantA, "k"), "o1", std::chrono::seconds{30});
  AttemptFinish finish{1, std::chrono::milliseconds{120}, acquirer::OutcomeKind::kCaptured,
                       acquirer::EvidenceClass::kApproved, 201};
  const auto done = Await(store_->Complete(begun.charge.id, Captured(), finish));
  ASSERT_TRUE(done.has_value()) << done.error().detail;
  EXPECT_TRUE(done->applied);
  EXPECT_EQ(done->charge.status, ChargeStatus::kCaptured);
  EXPECT_EQ(done->charge.acquirer_capture_id, "cap_1");
  EXPECT_EQ(done->charge.response_status, 201);
  EXPECT_EQ(done->charge.response_body, R"({"status":"captured"})");
  EXPECT_EQ(done->charge.last_sequence, 2);
  EXPECT_FALSE(done->charge.owner_id.has_value());
  EXPECT_EQ(db_->Scalar("SELECT string_agg(type || ':' || sequence, ',' ORDER BY sequence) FROM outbox"),
            "payments.charge.initiated.v1:1,payments.charge.captured.v1:2");
  EXPECT_EQ(db_->Scalar("SELECT outcome || ' ' || evidence || ' ' || http_status FROM acquirer_attempts"),
            "captured approved 201");

  // A second transition (the reconciler racing) changes nothing and writes no event.
  Transition failed;
  failed.to = ChargeStatus::kFailed;
  failed.failure_reason = "not_captured";
  const auto late = Await(store_->Complete(begun.charge.id, failed, std::nullopt));
  ASSERT_TRUE(late.has_value());
  EXPECT_FALSE(late->applied);
  EXPECT_EQ(late->charge.status, ChargeStatus::kCaptured);
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM outbox"), "2");
}

TEST_F(ChargeStoreTest, ConcurrentCompletesProduceExactlyOneTerminalEvent) {
  const auto begun = Begin(Request(kMerchantA, "k"), "o1", std::chrono::seconds{30});
  asio::io_context io;
  int applied = 0;
  std::vector<ChargeStatus> seen;
  for (int i = 0; i < 8; ++i) {
    asio::co_spawn(io, [&, i]() -> asio::awaitable<void> {
      auto t = Captured();
      if (i % 2 == 1) {
        t.to = ChargeStatus::kFailed;
        t.acquirer_capture_id.reset();
        t.decline_code = "card_declined";
      }
      const auto r = co_await store_->Complete(begun.charge.id, t, std::nullopt);
      if (r && r->applied) ++applied;
      if (r) seen.push_back(r->charge.status);
    }, asio::detached);
  }
  io.run();
  EXPECT_EQ(applied, 1);
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM outbox WHERE type <> 'payments.charge.initiated.v1'"), "1");
  // Every loser sees what won (a loser that waited on the winner's row lock reads it again after the
  // commit), never the `pending` of its own statement's snapshot.
  ASSERT_EQ(seen.size(), 8u);
  const auto won = ParseChargeStatus(db_->Scalar("SELECT status FROM charges"));
  for (const auto status : seen) EXPECT_EQ(status, won);
}

TEST_F(ChargeStoreTest, TheLoserOfACompleteWaitingOnTheWinnersLockReadsWhatWon) {
  const auto begun = Begin(Request(kMerchantA, "k"), "o1", std::chrono::seconds{30});
  // The winner holds the row (uncommitted) while the loser's statement waits for it.
  std::thread winner([&] {
    db_->Execute("BEGIN; UPDATE charges SET status = 'captured', last_sequence = 2, owner_id = NULL;"
                 " SELECT pg_sleep(1); COMMIT;");
  });
  std::this_thread::sleep_for(std::chrono::milliseconds{300});
  const auto lost = Await(store_->Complete(begun.charge.id, Captured(), std::nullopt));
  winner.join();
  ASSERT_TRUE(lost.has_value()) << lost.error().detail;
  EXPECT_FALSE(lost->applied);
  EXPECT_EQ(lost->charge.status, ChargeStatus::kCaptured);
}

// An inference ("nothing was sent", "not found on repeated looks") lands only while its writer holds the
// charge's lease; the acquirer's answer lands whoever holds it.
TEST_F(ChargeStoreTest, AnInferenceLandsOnlyForTheOwnerOfTheLease) {
  const auto begun = Begin(Request(kMerchantA, "k"), "o1", std::chrono::seconds{30});
  Transition inferred;
  inferred.to = ChargeStatus::kFailed;
  inferred.basis = Basis::kInference;
  inferred.failure_reason = "acquirer_unreachable";

  inferred.owner_id = "";
  const auto ownerless = Await(store_->Complete(begun.charge.id, inferred, std::nullopt));
  ASSERT_FALSE(ownerless.has_value());
  EXPECT_EQ(ownerless.error().code, db::DbErrc::kFailed);

  inferred.owner_id = "o2";
  const auto other = Await(store_->Complete(begun.charge.id, inferred, std::nullopt));
  ASSERT_TRUE(other.has_value()) << other.error().detail;
  EXPECT_FALSE(other->applied);
  EXPECT_EQ(other->charge.status, ChargeStatus::kPending);
  EXPECT_EQ(other->charge.owner_id, "o1");

  auto proven = Captured();
  proven.owner_id = "o2";  // not the owner, but the acquirer's answer
  const auto captured = Await(store_->Complete(begun.charge.id, proven, std::nullopt));
  ASSERT_TRUE(captured.has_value()) << captured.error().detail;
  EXPECT_TRUE(captured->applied);
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM outbox"), "2");
}

TEST_F(ChargeStoreTest, AnInferenceOfTheOwnerLands) {
  const auto begun = Begin(Request(kMerchantA, "k"), "o1", std::chrono::seconds{30});
  Transition inferred;
  inferred.to = ChargeStatus::kFailed;
  inferred.basis = Basis::kInference;
  inferred.owner_id = "o1";
  inferred.failure_reason = "acquirer_unreachable";
  const auto done = Await(store_->Complete(begun.charge.id, inferred, std::nullopt));
  ASSERT_TRUE(done.has_value()) << done.error().detail;
  EXPECT_TRUE(done->applied);
  EXPECT_EQ(done->charge.failure_reason, "acquirer_unreachable");
}

// Issue 41, defect 3: a run that read "captured" before the deadline and stalled past its lease must not
// record it once another run has set out to void that capture (its void attempt is on record before it
// is sent), even if the voiding run's own `canceled` was lost. Before the fix the capture landed on any
// pending charge, and the client was replayed 201 for money the acquirer had given back.
TEST_F(ChargeStoreTest, ACaptureDoesNotLandOnceAVoidIsOnRecord) {
  const auto begun = Begin(Request(kMerchantA, "k"), "o1", std::chrono::seconds{30});
  const Lease voider{"reconciler/run-2", std::chrono::seconds{30}};
  db_->Execute("UPDATE charges SET owner_id = 'reconciler/run-2', lease_expires_at = now() + interval '30 seconds'");
  const auto void_attempt = Await(store_->StartAttempt(
      begun.charge.id, {"44444444-4444-4444-8444-444444444444", acquirer::Operation::kVoid, "reconciler", voider, {}}));
  ASSERT_TRUE(void_attempt.has_value()) << void_attempt.error().detail;
  ASSERT_EQ(void_attempt->attempt_no, 2);
  // The voiding run dies here: its `canceled` never lands.

  const auto stale = Await(store_->Complete(begun.charge.id, Captured(), std::nullopt));
  ASSERT_TRUE(stale.has_value()) << stale.error().detail;
  EXPECT_FALSE(stale->applied);
  EXPECT_EQ(stale->refused, Refusal::kVoidOnRecord);
  EXPECT_EQ(stale->charge.status, ChargeStatus::kPending);
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM outbox"), "1");
  EXPECT_TRUE(Await(store_->ReadAttemptHistory(begun.charge.id)).value().void_attempted);

  // Nor is another capture of it recorded (so none is sent), whoever holds it.
  const auto capture = Await(store_->StartAttempt(
      begun.charge.id, {"55555555-5555-4555-8555-555555555555", acquirer::Operation::kCapture, "reconciler", voider,
                        std::chrono::hours{1}}));
  ASSERT_TRUE(capture.has_value()) << capture.error().detail;
  EXPECT_EQ(capture->refused, Refusal::kVoidOnRecord);
}

// A void whose error the acquirer stored under its key (Stripe's 500) is counted: the next void goes under a
// key of its own. Other void answers, and an unfinished void (the same key replays whatever it got), are not.
TEST_F(ChargeStoreTest, TheHistoryCountsVoidsWhoseErrorTheAcquirerStored) {
  const auto begun = Begin(Request(kMerchantA, "k"), "o1", std::chrono::seconds{30});
  const Lease voider{"o1", std::chrono::seconds{30}};
  const auto void_attempt = [&](const char* request_id) {
    const auto started = Await(
        store_->StartAttempt(begun.charge.id, {request_id, acquirer::Operation::kVoid, "reconciler", voider, {}}));
    EXPECT_FALSE(started.value().refused);
    return started.value().attempt_no;
  };
  const auto finish = [&](int attempt_no, acquirer::OutcomeKind outcome, std::optional<int> http_status) {
    ASSERT_TRUE(Await(store_->FinishAttempt(begun.charge.id, {attempt_no, std::chrono::milliseconds{5}, outcome,
                                                              acquirer::EvidenceClass::kUnknown, http_status}))
                    .has_value());
  };
  const auto stored_errors = [&] {
    return Await(store_->ReadAttemptHistory(begun.charge.id)).value().void_stored_errors;
  };
  EXPECT_EQ(stored_errors(), 0);
  finish(void_attempt("77777777-7777-4777-8777-777777777771"), acquirer::OutcomeKind::kStoredError, 500);
  EXPECT_EQ(stored_errors(), 1);
  finish(void_attempt("77777777-7777-4777-8777-777777777772"), acquirer::OutcomeKind::kTimedOut, std::nullopt);
  void_attempt("77777777-7777-4777-8777-777777777773");  // unfinished
  EXPECT_EQ(stored_errors(), 1);
  finish(void_attempt("77777777-7777-4777-8777-777777777774"), acquirer::OutcomeKind::kStoredError, 500);
  EXPECT_EQ(stored_errors(), 2);
}

// Issue 41, defect 5: an owner whose lease ran out (its database or the acquirer was slow, and another
// actor took the charge over) records, and so sends, no further capture or void; recording one renews the
// live owner's lease. Before the fix any actor could record a capture attempt at any time.
TEST_F(ChargeStoreTest, ACaptureOrVoidIsRecordedOnlyByTheLiveOwnerAndRenewsItsLease) {
  const auto begun = Begin(Request(kMerchantA, "k"), "o1", std::chrono::seconds{2});
  const auto start = [&](const std::string& owner, acquirer::Operation op, const char* request_id) {
    return Await(store_->StartAttempt(begun.charge.id, {request_id, op, "charge-api",
                                                        Lease{owner, std::chrono::seconds{60}}, std::chrono::hours{1}}))
        .value();
  };
  EXPECT_EQ(start("o2", acquirer::Operation::kCapture, "66666666-6666-4666-8666-666666666661").refused,
            Refusal::kNotOwner);
  EXPECT_EQ(start("o2", acquirer::Operation::kVoid, "66666666-6666-4666-8666-666666666662").refused,
            Refusal::kNotOwner);
  const auto own = start("o1", acquirer::Operation::kCapture, "66666666-6666-4666-8666-666666666663");
  EXPECT_FALSE(own.refused.has_value());
  EXPECT_EQ(own.attempt_no, 2);
  EXPECT_EQ(db_->Scalar("SELECT lease_expires_at > now() + interval '50 seconds' FROM charges"), "t");

  db_->Execute("UPDATE charges SET lease_expires_at = now() - interval '1 millisecond'");
  EXPECT_EQ(start("o1", acquirer::Operation::kCapture, "66666666-6666-4666-8666-666666666664").refused,
            Refusal::kNotOwner);
  // A lookup needs no owner: it moves no money.
  const auto look = Await(store_->StartAttempt(
      begun.charge.id, {"66666666-6666-4666-8666-666666666665", acquirer::Operation::kLookup, "reconciler",
                        std::nullopt, {}}));
  EXPECT_EQ(look.value().attempt_no, 3);
  // A capture without an owner is a bug, refused loudly rather than sent beside someone else's.
  const auto ownerless = Await(store_->StartAttempt(
      begun.charge.id, {"66666666-6666-4666-8666-666666666666", acquirer::Operation::kCapture, "reconciler",
                        std::nullopt, std::chrono::hours{1}}));
  ASSERT_FALSE(ownerless.has_value());
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM acquirer_attempts"), "3");
}

// Issue 41, defect 6: past the deadline (by the database's clock) no capture attempt is recorded and no
// capture lands, whoever computed what before; before the fix a takeover that judged the deadline before
// its lookup captured after it.
TEST_F(ChargeStoreTest, PastTheDeadlineNoCaptureIsRecordedNorLands) {
  const auto begun = Begin(Request(kMerchantA, "k"), "o1", std::chrono::seconds{30});
  db_->Execute("UPDATE charges SET created_at = now() - interval '61 minutes'");
  const auto attempt = Await(store_->StartAttempt(
      begun.charge.id, {"77777777-7777-4777-8777-777777777777", acquirer::Operation::kCapture, "charge-api",
                        Lease{"o1", std::chrono::seconds{30}}, std::chrono::hours{1}}));
  EXPECT_EQ(attempt.value().refused, Refusal::kPastDeadline);
  const auto late = Await(store_->Complete(begun.charge.id, Captured(), std::nullopt));
  ASSERT_TRUE(late.has_value()) << late.error().detail;
  EXPECT_FALSE(late->applied);
  EXPECT_EQ(late->refused, Refusal::kPastDeadline);
  EXPECT_GE(late->charge.age, std::chrono::minutes{61});
  // A void, or a decline, still lands past it.
  Transition declined;
  declined.to = ChargeStatus::kFailed;
  declined.decline_code = "card_declined";
  EXPECT_TRUE(Await(store_->Complete(begun.charge.id, declined, std::nullopt)).value().applied);
}

// Issue 41, defect 8: every time on record is the database's. A host whose clock runs an hour behind
// cannot order a lookup before the capture it followed, nor put an event behind its predecessor.
TEST_F(ChargeStoreTest, TimesOnRecordAreTheDatabasesAndTheStoredAnswerCarriesTheSameTime) {
  const auto begun = Begin(Request(kMerchantA, "k"), "o1", std::chrono::seconds{30});
  EXPECT_EQ(db_->Scalar("SELECT abs(extract(epoch FROM started_at - clock_timestamp())) < 5 FROM acquirer_attempts"),
            "t");
  auto t = Captured();
  t.response_body = std::string(R"({"id":"ch_1","status":"captured",)") + std::string(kDatabaseTimeMark) +
                    R"(,"description":"\"updated_at\":\"1970-01-01T00:00:00.000Z\""})";
  const auto done = Await(store_->Complete(begun.charge.id, t,
                                           AttemptFinish{1, std::chrono::milliseconds{1500},
                                                         acquirer::OutcomeKind::kCaptured,
                                                         acquirer::EvidenceClass::kApproved, 201}));
  ASSERT_TRUE(done.has_value()) << done.error().detail;
  ASSERT_TRUE(done->applied);
  const auto updated = FormatTimestamp(done->charge.updated_at);
  EXPECT_EQ(*done->charge.response_body, R"({"id":"ch_1","status":"captured","updated_at":")" + updated +
                                             R"(","description":"\"updated_at\":\"1970-01-01T00:00:00.000Z\""})");
  EXPECT_EQ(db_->Scalar("SELECT abs(extract(epoch FROM updated_at - now())) < 5 FROM charges"), "t");
  EXPECT_EQ(db_->Scalar("SELECT bool_and(o.created_at = c.updated_at) FROM outbox o JOIN charges c "
                        "ON o.aggregateid = charge_public_id(c.id) WHERE o.sequence = 2"),
            "t");
  EXPECT_EQ(db_->Scalar("SELECT payload->>'updated_at' FROM outbox WHERE sequence = 2"), updated);
  EXPECT_EQ(db_->Scalar("SELECT round(extract(epoch FROM finished_at - started_at) * 1000) FROM acquirer_attempts"),
            "1500");
}

// Issue 41, defect 2: an intent whose commit its writer never learned leaves attempt 1 unfinished, which
// reads as "a capture may have left". AbandonIntent records that it never left, so the reconciler fails
// the charge rather than capture it behind the back of a client told only to retry.
TEST_F(ChargeStoreTest, AnAbandonedIntentsFirstAttemptIsOnRecordAsNeverSent) {
  const auto begun = Begin(Request(kMerchantA, "k"), "o1", std::chrono::seconds{30});
  EXPECT_TRUE(Await(store_->ReadAttemptHistory(begun.charge.id)).value().capture_may_have_left);
  ASSERT_TRUE(Await(store_->AbandonIntent("o1", begun.first_request_id)).has_value());
  const auto history = Await(store_->ReadAttemptHistory(begun.charge.id)).value();
  EXPECT_FALSE(history.capture_may_have_left);
  EXPECT_EQ(db_->Scalar("SELECT owner_id IS NULL AND lease_expires_at IS NULL FROM charges"), "t");
  // Idempotent, and a no-op for an intent that never committed.
  ASSERT_TRUE(Await(store_->AbandonIntent("o1", begun.first_request_id)).has_value());
  ASSERT_TRUE(Await(store_->AbandonIntent("o9", "88888888-8888-4888-8888-888888888888")).has_value());
  EXPECT_EQ(db_->Scalar("SELECT outcome || ' ' || evidence FROM acquirer_attempts"), "not_sent not_sent");
}

TEST_F(ChargeStoreTest, AttemptsAreNumberedPerCharge) {
  const auto begun = Begin(Request(kMerchantA, "k"), "o1", std::chrono::seconds{30});
  const auto second = Await(store_->StartAttempt(
      begun.charge.id, {"33333333-3333-4333-8333-333333333333", acquirer::Operation::kLookup, "reconciler",
                        std::nullopt, {}}));
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->attempt_no, 2);
  ASSERT_TRUE(Await(store_->FinishAttempt(begun.charge.id, {2, std::chrono::milliseconds{80},
                                                            acquirer::OutcomeKind::kNotFound,
                                                            acquirer::EvidenceClass::kUnknown, 404}))
                  .has_value());
  EXPECT_EQ(db_->Scalar("SELECT outcome || ' ' || evidence FROM acquirer_attempts WHERE attempt_no = 2"),
            "not_found unknown");
}

TEST_F(ChargeStoreTest, ReleaseLetsTheNextRequestTakeOverAtOnce) {
  const auto begun = Begin(Request(kMerchantA, "k"), "o1", std::chrono::seconds{30});
  ASSERT_TRUE(Await(store_->Release(begun.charge.id, "o1",
                                    AttemptFinish{1, std::chrono::milliseconds{10'000}, acquirer::OutcomeKind::kTimedOut,
                                                  acquirer::EvidenceClass::kUnknown, std::nullopt}))
                  .has_value());
  EXPECT_EQ(Begin(Request(kMerchantA, "k"), "o2", std::chrono::seconds{30}).outcome, BeginOutcome::kTakenOver);
  EXPECT_EQ(db_->Scalar("SELECT evidence::text || coalesce(http_status::text, '-') FROM acquirer_attempts"),
            "unknown-");
}

TEST_F(ChargeStoreTest, FindIsScopedPerMerchant) {
  const auto begun = Begin(Request(kMerchantA, "k"), "o1", std::chrono::seconds{30});
  EXPECT_TRUE(Await(store_->FindById(kMerchantA, begun.charge.id)).value().has_value());
  EXPECT_FALSE(Await(store_->FindById(kMerchantB, begun.charge.id)).value().has_value());
  EXPECT_TRUE(Await(store_->FindByKey(kMerchantA, "k")).value().has_value());
  EXPECT_FALSE(Await(store_->FindByKey(kMerchantB, "k")).value().has_value());
}

TEST_F(ChargeStoreTest, PendingOverdueCountsOnlyOldPendingCharges) {
  Begin(Request(kMerchantA, "old"), "o1", std::chrono::seconds{30});
  Begin(Request(kMerchantA, "new"), "o2", std::chrono::seconds{30});
  db_->Execute("UPDATE charges SET created_at = now() - interval '2 hours' WHERE idempotency_key = 'old'");
  EXPECT_EQ(Await(store_->CountPendingOlderThan(std::chrono::hours{1})).value(), 1);
}

TEST_F(ChargeStoreTest, UnreachableDatabaseIsUnavailableNotFailed) {
  db::Database nowhere("postgresql://postgres@127.0.0.1:1/x?connect_timeout=2", {.connections = 1});
  auto store = MakePgChargeStore(nowhere);
  const auto r = Await(store->FindByKey(kMerchantA, "k"));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, db::DbErrc::kUnavailable);
}

}  // namespace
}  // namespace charge_outbox::charges
