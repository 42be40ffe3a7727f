// PgReconciliationStore against a real PostgreSQL with the real schema: which charges a claim takes (and
// which it must leave to charge-api or another run), the keyset cursor, overlapping claims never taking
// the same charge, renewing, rescheduling and releasing the lease, the not-found history, and the window
// report's reads and review flag.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <thread>

#include "charge_outbox/charges/charge_store.hpp"
#include "charge_outbox/charges/reconciliation_store.hpp"
#include "await.hpp"
#include "pg_test_database.hpp"

namespace charge_outbox::charges {
namespace {

using namespace std::chrono_literals;
using ::testing::ElementsAre;
using testing::Await;
using testing::PgTestDatabase;

constexpr const char* kMerchant = "00000000-0000-4000-8000-00000000000a";
constexpr const char* kTraceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

class ReconciliationStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = PgTestDatabase::Create(::testing::UnitTest::GetInstance()->current_test_info()->name(),
                                 PgTestDatabase::Schema::kMigrated);
    db_->Execute(std::string("INSERT INTO merchants (id, name) VALUES ('") + kMerchant + "', 'a')");
    database_ = std::make_unique<db::Database>(db_->url(), db::DatabaseOptions{.connections = 4});
    store_ = MakePgReconciliationStore(*database_);
    charges_ = MakePgChargeStore(*database_);
  }

  // `n` pending charges keyed key-<first>..., created `age` ago, one millisecond apart (oldest first).
  void InsertPending(int n, const std::string& age = "10 minutes", int first = 0) {
    db_->Execute(
        "INSERT INTO charges (id, merchant_id, idempotency_key, request_fingerprint, order_id, amount, currency,"
        " payment_method, created_at)"
        " SELECT gen_random_uuid(), '" + std::string(kMerchant) + "', 'key-' || i, sha256(('fp' || i)::bytea),"
        " 'PED-' || i, 1000 + i, 'BRL', 'pm_tok_visa',"
        " now() - interval '" + age + "' + i * interval '1 millisecond'"
        " FROM generate_series(" + std::to_string(first) + ", " + std::to_string(first + n - 1) + ") AS i");
  }

  std::string IdOf(const std::string& key) {
    return db_->Scalar("SELECT id FROM charges WHERE idempotency_key = '" + key + "'");
  }

  ClaimBatch Claim(const std::string& owner, int limit, std::optional<SweepCursor> after = std::nullopt,
                   std::chrono::milliseconds grace = 2min, std::chrono::milliseconds lease = 60s) {
    ClaimRequest request{owner, lease, grace, limit, std::move(after)};
    auto r = Await(store_->ClaimDue(request));
    EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().detail);
    return r ? std::move(*r) : ClaimBatch{};
  }

  static std::vector<std::string> Keys(const ClaimBatch& batch) {
    std::vector<std::string> keys;
    for (const auto& c : batch.charges) keys.push_back(c.charge.idempotency_key);
    return keys;
  }

  // Records a finished attempt directly, with its start `ago` in the past.
  void RecordAttempt(const std::string& charge_id, const std::string& operation, const std::string& outcome,
                     const std::string& evidence, const std::string& ago) {
    db_->Execute(
        "WITH c AS (UPDATE charges SET attempt_count = attempt_count + 1 WHERE id = '" + charge_id +
        "' RETURNING id, attempt_count)"
        " INSERT INTO acquirer_attempts (charge_id, attempt_no, request_id, operation, actor, started_at,"
        " finished_at, outcome, evidence)"
        " SELECT c.id, c.attempt_count, gen_random_uuid(), '" + operation + "', 'reconciler',"
        " now() - interval '" + ago + "', now() - interval '" + ago + "', " +
        (outcome.empty() ? "NULL" : "'" + outcome + "'") + ", " +
        (evidence.empty() ? "NULL" : "'" + evidence + "'") + " FROM c");
  }

  std::unique_ptr<PgTestDatabase> db_;
  std::unique_ptr<db::Database> database_;
  std::unique_ptr<ReconciliationStore> store_;
  std::unique_ptr<ChargeStore> charges_;
};

TEST_F(ReconciliationStoreTest, ClaimTakesOnlyDueUnleasedPendingChargesOlderThanGraceOldestFirst) {
  InsertPending(6);
  InsertPending(1, "10 seconds", 100);  // within the grace period
  db_->Execute("UPDATE charges SET status = 'captured' WHERE idempotency_key = 'key-1'");
  db_->Execute("UPDATE charges SET next_check_at = now() + interval '1 minute' WHERE idempotency_key = 'key-2'");
  db_->Execute("UPDATE charges SET next_check_at = now() - interval '1 second' WHERE idempotency_key = 'key-3'");
  db_->Execute("UPDATE charges SET owner_id = 'charge-api/r1', lease_expires_at = now() + interval '30 seconds'"
               " WHERE idempotency_key = 'key-4'");
  db_->Execute("UPDATE charges SET owner_id = 'charge-api/r2', lease_expires_at = now() - interval '1 second'"
               " WHERE idempotency_key = 'key-5'");

  const auto batch = Claim("reconciler/run-1", 10);
  EXPECT_THAT(Keys(batch), ElementsAre("key-0", "key-3", "key-5"));
  EXPECT_EQ(db_->Scalar("SELECT string_agg(idempotency_key, ',' ORDER BY created_at) FROM charges"
                        " WHERE owner_id = 'reconciler/run-1' AND lease_expires_at > now() + interval '50 seconds'"),
            "key-0,key-3,key-5");
  // The live charge-api lease is untouched.
  EXPECT_EQ(db_->Scalar("SELECT owner_id FROM charges WHERE idempotency_key = 'key-4'"), "charge-api/r1");
  ASSERT_TRUE(batch.next.has_value());
  EXPECT_EQ(db_->Scalar("SELECT '" + batch.next->created_at + "'::timestamptz = created_at FROM charges"
                        " WHERE idempotency_key = 'key-5'"),
            "t");
  EXPECT_EQ(batch.charges[0].charge.amount, 1000);
  EXPECT_EQ(batch.charges[0].charge.payment_method, "pm_tok_visa");
  EXPECT_EQ(batch.charges[0].charge.status, ChargeStatus::kPending);

  // Claimed charges are not claimable again while the lease lives, even from the start.
  EXPECT_TRUE(Claim("reconciler/run-2", 10).charges.empty());
  EXPECT_FALSE(Claim("reconciler/run-2", 10).next.has_value());
}

TEST_F(ReconciliationStoreTest, CursorWalksOnwardEvenWithEqualCreationTimes) {
  // Charges sharing the cursor's timestamp are read again, and those this run already holds are skipped.
  InsertPending(5);
  db_->Execute("UPDATE charges SET created_at = now() - interval '1 hour'");  // all equal: the id breaks ties
  const auto first = Claim("r", 2);
  ASSERT_EQ(first.charges.size(), 2u);
  const auto second = Claim("r", 2, first.next);
  ASSERT_EQ(second.charges.size(), 2u);
  const auto third = Claim("r", 2, second.next);
  ASSERT_EQ(third.charges.size(), 1u);
  EXPECT_TRUE(Claim("r", 2, third.next).charges.empty());
  std::set<std::string> all;
  for (const auto* b : {&first, &second, &third}) {
    for (const auto& c : b->charges) all.insert(c.charge.id);
  }
  EXPECT_EQ(all.size(), 5u);
}

TEST_F(ReconciliationStoreTest, OverlappingClaimersNeverTakeTheSameCharge) {
  InsertPending(600);
  std::vector<std::string> claimed[3];
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      std::optional<SweepCursor> cursor;
      for (;;) {
        auto batch = Claim("r" + std::to_string(t), 7, cursor);
        if (batch.charges.empty()) break;
        for (const auto& c : batch.charges) claimed[t].push_back(c.charge.id);
        cursor = batch.next;
      }
    });
  }
  for (auto& th : threads) th.join();
  std::set<std::string> all;
  std::size_t total = 0;
  for (const auto& ids : claimed) {
    total += ids.size();
    all.insert(ids.begin(), ids.end());
  }
  EXPECT_EQ(total, 600u);
  EXPECT_EQ(all.size(), 600u);
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM charges WHERE owner_id LIKE 'r_'"), "600");
}

// The lease renewal and the attempt history are the charge store's, shared by charge-api and the
// reconciler; tested here beside the claim that leases charges to the reconciler.
TEST_F(ReconciliationStoreTest, RenewHoldsOnlyForTheOwnerOfAPendingCharge) {
  InsertPending(2);
  const auto batch = Claim("mine", 2);
  ASSERT_EQ(batch.charges.size(), 2u);
  const auto a = batch.charges[0].charge.id;
  const auto b = batch.charges[1].charge.id;
  db_->Execute("UPDATE charges SET lease_expires_at = now() + interval '1 second' WHERE id = '" + a + "'");
  EXPECT_TRUE(Await(charges_->RenewLease(a, "mine", 45s)).value());
  EXPECT_EQ(db_->Scalar("SELECT lease_expires_at > now() + interval '40 seconds' FROM charges WHERE id = '" + a + "'"),
            "t");
  EXPECT_FALSE(Await(charges_->RenewLease(a, "someone-else", 45s)).value());
  // Taken over by charge-api once the lease had run out: ours no more.
  db_->Execute("UPDATE charges SET owner_id = 'charge-api/r9' WHERE id = '" + b + "'");
  EXPECT_FALSE(Await(charges_->RenewLease(b, "mine", 45s)).value());
}

TEST_F(ReconciliationStoreTest, ChargeApiRetryOfAClaimedChargeIsInFlight) {
  InsertPending(1);
  ASSERT_EQ(Claim("reconciler/run", 1).charges.size(), 1u);
  NewCharge n;
  n.merchant_id = kMerchant;
  n.idempotency_key = "key-0";
  n.terms.order_id = "PED-0";
  n.terms.amount = 1000;
  n.terms.currency = "BRL";
  n.terms.payment_method = "pm_tok_visa";
  // The same fingerprint the row holds, so the retry is a legitimate repeat.
  const auto hex = db_->Scalar("SELECT encode(request_fingerprint, 'hex') FROM charges");
  for (std::size_t i = 0; i < n.fingerprint.size(); ++i) {
    n.fingerprint[i] = static_cast<std::uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  }
  const FirstAttempt first{"99999999-9999-4999-8999-999999999999", acquirer::Operation::kCapture, "charge-api"};
  const auto begun = Await(charges_->Begin(n, {"charge-api/req", 30s}, first));
  ASSERT_TRUE(begun.has_value()) << begun.error().detail;
  EXPECT_EQ(begun->outcome, BeginOutcome::kInFlight);
}

TEST_F(ReconciliationStoreTest, RescheduleCountsTheLookFinishesTheAttemptAndReleasesTheLease) {
  InsertPending(1);
  const auto batch = Claim("mine", 1);
  ASSERT_EQ(batch.charges.size(), 1u);
  const auto id = batch.charges[0].charge.id;
  EXPECT_EQ(batch.charges[0].check_count, 0);
  const AttemptStart start{"44444444-4444-4444-8444-444444444444", acquirer::Operation::kLookup, "reconciler",
                           std::nullopt, {}};
  const int attempt = Await(charges_->StartAttempt(id, start)).value().attempt_no;
  const AttemptFinish finish{attempt, 10s, acquirer::OutcomeKind::kTimedOut,
                             acquirer::EvidenceClass::kUnknown, std::nullopt};
  EXPECT_FALSE(Await(store_->Reschedule(id, "other", 30s, finish)).value());
  EXPECT_TRUE(Await(store_->Reschedule(id, "mine", 30s, finish)).value());
  EXPECT_EQ(db_->Scalar("SELECT check_count || ' ' || (owner_id IS NULL) || ' ' || (lease_expires_at IS NULL) || ' ' ||"
                        " (next_check_at BETWEEN now() + interval '25 seconds' AND now() + interval '31 seconds')"
                        " FROM charges"),
            "1 true true true");
  EXPECT_EQ(db_->Scalar("SELECT outcome || ' ' || evidence || ' ' || (finished_at IS NOT NULL) FROM acquirer_attempts"),
            "timed_out unknown true");
  EXPECT_TRUE(Claim("mine", 1).charges.empty());  // not due yet
  db_->Execute("UPDATE charges SET next_check_at = now() - interval '1 millisecond'");
  const auto again = Claim("mine", 1);
  ASSERT_EQ(again.charges.size(), 1u);
  EXPECT_EQ(again.charges[0].check_count, 1);
}

TEST_F(ReconciliationStoreTest, ReleaseAllGivesBackOnlyTheOwnersPendingLeases) {
  InsertPending(3);
  ASSERT_EQ(Claim("mine", 2).charges.size(), 2u);
  ASSERT_EQ(Claim("theirs", 1).charges.size(), 1u);
  db_->Execute("UPDATE charges SET next_check_at = now() + interval '5 minutes' WHERE owner_id = 'mine'");
  EXPECT_EQ(Await(store_->ReleaseAll("mine", 2min)).value(), 2);
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM charges WHERE owner_id IS NULL AND lease_expires_at IS NULL"), "2");
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM charges WHERE next_check_at IS NOT NULL"), "2");  // schedule kept
  EXPECT_EQ(db_->Scalar("SELECT owner_id FROM charges WHERE owner_id IS NOT NULL"), "theirs");
  EXPECT_EQ(Await(store_->ReleaseAll("mine", 2min)).value(), 0);
}

TEST_F(ReconciliationStoreTest, AttemptHistoryCountsLooksSinceTheLastCaptureThatMayHaveBeenSent) {
  InsertPending(1);
  const auto id = IdOf("key-0");
  const auto fresh = Await(charges_->ReadAttemptHistory(id)).value();
  EXPECT_EQ(fresh.not_found_looks, 0);
  EXPECT_FALSE(fresh.capture_may_have_left);

  RecordAttempt(id, "capture", "timed_out", "unknown", "10 minutes");
  RecordAttempt(id, "lookup", "not_found", "unknown", "9 minutes");  // before the later capture: does not count
  RecordAttempt(id, "capture", "", "", "8 minutes");                  // unfinished: may have been sent
  RecordAttempt(id, "lookup", "not_found", "unknown", "7 minutes");
  RecordAttempt(id, "lookup", "timed_out", "unknown", "6 minutes");   // not an answer
  RecordAttempt(id, "capture", "not_sent", "not_sent", "5 minutes");  // provably never left: does not reset
  RecordAttempt(id, "lookup", "not_found", "unknown", "4 minutes");
  const auto history = Await(charges_->ReadAttemptHistory(id)).value();
  EXPECT_EQ(history.not_found_looks, 2);
  EXPECT_TRUE(history.capture_may_have_left);
  ASSERT_TRUE(history.first_not_found_at.has_value());
  const auto age = std::chrono::system_clock::now() - *history.first_not_found_at;
  EXPECT_GT(age, 6min + 50s);
  EXPECT_LT(age, 7min + 10s);
}

TEST_F(ReconciliationStoreTest, AttemptHistoryKnowsWhenNoCaptureCanHaveLeft) {
  InsertPending(1);
  const auto id = IdOf("key-0");
  RecordAttempt(id, "capture", "not_sent", "not_sent", "2 minutes");
  RecordAttempt(id, "capture", "not_sent", "not_sent", "1 minute");
  RecordAttempt(id, "lookup", "not_found", "unknown", "30 seconds");
  const auto history = Await(charges_->ReadAttemptHistory(id)).value();
  EXPECT_FALSE(history.capture_may_have_left);
  EXPECT_EQ(history.not_found_looks, 1);  // no capture may have left: every look counts
}

TEST_F(ReconciliationStoreTest, FlagForReviewMovesOnlyTheExpectedTerminalStatusAndAnnouncesIt) {
  InsertPending(3);
  const auto captured = IdOf("key-0");
  const auto pending = IdOf("key-1");
  const auto failed = IdOf("key-2");
  db_->Execute("UPDATE charges SET status = 'captured', acquirer_capture_id = 'cap_1', last_sequence = 2,"
               " response_status = 201, response_body = convert_to('{}', 'UTF8') WHERE id = '" + captured + "'");
  db_->Execute("UPDATE charges SET status = 'failed', failure_reason = 'not_captured' WHERE id = '" + failed + "'");
  EXPECT_FALSE(Await(charges_->FlagForReview(captured, ChargeStatus::kFailed, "window_mismatch", "")).value());
  EXPECT_FALSE(Await(charges_->FlagForReview(pending, ChargeStatus::kPending, "window_mismatch", "")).value());
  const auto flagged =
      Await(charges_->FlagForReview(captured, ChargeStatus::kCaptured, "window_amount_mismatch", kTraceparent))
          .value();
  ASSERT_TRUE(flagged.has_value());
  EXPECT_EQ(flagged->status, ChargeStatus::kNeedsReview);
  EXPECT_FALSE(flagged->response_status.has_value());  // a replay now answers what the state calls for
  EXPECT_FALSE(Await(charges_->FlagForReview(captured, ChargeStatus::kNeedsReview, "again", "")).value());

  EXPECT_EQ(db_->Scalar("SELECT status || ' ' || failure_reason || ' ' || acquirer_capture_id || ' ' || last_sequence"
                        " || ' ' || (response_body IS NULL) FROM charges WHERE id = '" + captured + "'"),
            "needs_review window_amount_mismatch cap_1 3 true");
  EXPECT_EQ(db_->Scalar("SELECT type || ' ' || sequence || ' ' || (payload->>'status') || ' ' || traceparent"
                        " FROM outbox"),
            std::string("payments.charge.needs_review.v1 3 needs_review ") + kTraceparent);
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM outbox"), "1");
  EXPECT_EQ(db_->Scalar("SELECT status FROM charges WHERE id = '" + failed + "'"), "failed");
}

// Issue 41, defect 7: a charge created in the window and recorded captured seconds ago may not be in the
// acquirer's lookups yet; the report's own side leaves it out until a visibility window has passed, so it
// is never flagged missing_at_acquirer for a capture the acquirer is still making visible. Before the fix
// the local side had no upper bound.
TEST_F(ReconciliationStoreTest, TheWindowsOwnSideLeavesOutCapturesRecordedWithinTheVisibilityWindow) {
  InsertPending(2, "3 hours");
  db_->Execute("UPDATE charges SET status = 'captured', created_at = now() - interval '90 minutes',"
               " updated_at = now() - interval '10 seconds' WHERE idempotency_key = 'key-0'");
  db_->Execute("UPDATE charges SET status = 'captured', created_at = now() - interval '90 minutes',"
               " updated_at = now() - interval '6 minutes' WHERE idempotency_key = 'key-1'");
  const auto now = std::chrono::system_clock::now();
  const auto found = Await(store_->FindCapturedIdsInWindow(now - 2h, now - 1h, now - 3h, 5min)).value();
  EXPECT_THAT(found, ElementsAre(IdOf("key-1")));
}

TEST_F(ReconciliationStoreTest, WindowReadsFindCapturedChargesWhoseCaptureMayLieInTheWindowAndChargesById) {
  InsertPending(4, "3 hours");
  // key-0: created and recorded captured inside [now - 2h, now - 1h).
  // key-1: created before the window, recorded captured inside it.
  // key-2: created and recorded captured before the window.
  // key-3: pending.
  db_->Execute("UPDATE charges SET status = 'captured', created_at = now() - interval '90 minutes',"
               " updated_at = now() - interval '89 minutes' WHERE idempotency_key = 'key-0'");
  db_->Execute("UPDATE charges SET status = 'captured', created_at = now() - interval '150 minutes',"
               " updated_at = now() - interval '100 minutes' WHERE idempotency_key = 'key-1'");
  db_->Execute("UPDATE charges SET status = 'captured', created_at = now() - interval '150 minutes',"
               " updated_at = now() - interval '149 minutes' WHERE idempotency_key = 'key-2'");
  const auto now = std::chrono::system_clock::now();
  const auto found = Await(store_->FindCapturedIdsInWindow(now - 2h, now - 1h, now - 3h, 5min)).value();
  EXPECT_THAT(found, ElementsAre(IdOf("key-1"), IdOf("key-0")));  // ids only, in (created_at, id) order
  // The scan bound excludes what was created before it.
  EXPECT_EQ(Await(store_->FindCapturedIdsInWindow(now - 2h, now - 1h, now - 2h, 5min)).value().size(), 1u);

  const auto by_id = Await(store_->FindByIds({IdOf("key-3"), IdOf("key-0"), "11111111-1111-4111-8111-111111111111"}))
                         .value();
  std::vector<std::string> statuses;
  for (const auto& c : by_id) statuses.push_back(c.idempotency_key + ":" + std::string(ToString(c.status)));
  std::sort(statuses.begin(), statuses.end());
  EXPECT_THAT(statuses, ElementsAre("key-0:captured", "key-3:pending"));
  EXPECT_TRUE(Await(store_->FindByIds({})).value().empty());
}

}  // namespace
}  // namespace charge_outbox::charges
