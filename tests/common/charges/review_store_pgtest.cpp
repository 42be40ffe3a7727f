// PgReviewStore against a real PostgreSQL with the real schema: a person's decision lands with its event
// and its audit row in one statement, exactly once however many decide at once, only on the review it was
// taken on; and what a person reads to decide (the list, the story of one charge).
#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <thread>

#include "await.hpp"
#include "charge_outbox/charges/charge_store.hpp"
#include "charge_outbox/charges/review_store.hpp"
#include "charge_outbox/util/sha256.hpp"
#include "pg_test_database.hpp"

namespace charge_outbox::charges {
namespace {

using testing::Await;
using testing::PgTestDatabase;

constexpr const char* kMerchantA = "00000000-0000-4000-8000-00000000000a";
constexpr const char* kMerchantB = "00000000-0000-4000-8000-00000000000b";

class ReviewStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = PgTestDatabase::Create(::testing::UnitTest::GetInstance()->current_test_info()->name(),
                                 PgTestDatabase::Schema::kMigrated);
    db_->Execute(std::string("INSERT INTO merchants (id, name) VALUES ('") + kMerchantA + "', 'a'), ('" + kMerchantB +
                 "', 'b')");
    database_ = std::make_unique<db::Database>(
        db_->url(), db::DatabaseOptions{.connections = 4, .application_name = "charge-admin"});
    charges_ = MakePgChargeStore(*database_);
    review_ = MakePgReviewStore(*database_);
  }

  // A charge created as charge-api creates it, then put in review with `reason` as the reconciler would.
  Charge InReview(const std::string& merchant, const std::string& key, const std::string& reason,
                  const std::string& order = "PED-1") {
    NewCharge n;
    n.merchant_id = merchant;
    n.idempotency_key = key;
    n.terms.order_id = order;
    n.terms.amount = 25000;
    n.terms.currency = "BRL";
    n.terms.payment_method = "pm_tok_visa";
    n.fingerprint = util::Sha256("fp:" + key);
    const auto begun = Await(charges_->Begin(n, {"api/" + key, std::chrono::seconds{30}},
                                             FirstAttempt{RequestId(key), acquirer::Operation::kCapture, "charge-api"}));
    EXPECT_TRUE(begun.has_value());
    db_->Execute("UPDATE charges SET status = 'needs_review', failure_reason = '" + reason +
                 "', acquirer_capture_id = 'cap_old', owner_id = NULL, lease_expires_at = NULL WHERE id = '" +
                 begun->charge.id + "'");
    return begun->charge;
  }

  static std::string RequestId(const std::string& seed) {
    const auto h = util::Sha256Hex(seed);
    return h.substr(0, 8) + "-" + h.substr(8, 4) + "-4" + h.substr(13, 3) + "-8" + h.substr(17, 3) + "-" +
           h.substr(20, 12);
  }

  static Resolution Decision(const Charge& c, ChargeStatus to, const std::string& reason) {
    Resolution r;
    r.charge_id = c.id;
    r.expected_reason = reason;
    r.to = to;
    r.capture_id = to == ChargeStatus::kFailed ? std::nullopt : std::optional<std::string>("cap_live");
    if (to != ChargeStatus::kCaptured) r.failure_reason = "operator_decision";
    r.operator_name = "alice";
    r.reason = "ticket OPS-1: the acquirer's statement shows the capture";
    r.acquirer_said = "a live capture cap_live of 25000 BRL";
    return r;
  }

  std::unique_ptr<PgTestDatabase> db_;
  std::unique_ptr<db::Database> database_;
  std::unique_ptr<ChargeStore> charges_;
  std::unique_ptr<ReviewStore> review_;
};

TEST_F(ReviewStoreTest, ADecisionLandsWithItsEventNamingThePersonAndItsAuditRowInOneStatement) {
  const auto c = InReview(kMerchantA, "k1", "acquirer_capture_contradicts_failed");
  const auto r = Await(review_->Resolve(Decision(c, ChargeStatus::kCaptured, "acquirer_capture_contradicts_failed")));
  ASSERT_TRUE(r.has_value()) << r.error().detail;
  ASSERT_TRUE(r->applied);
  EXPECT_EQ(r->charge.status, ChargeStatus::kCaptured);
  EXPECT_EQ(r->charge.acquirer_capture_id, "cap_live");
  EXPECT_EQ(r->charge.failure_reason, std::nullopt);

  // The event: the usual type with the next sequence, the person's name in it, written as charge-admin.
  EXPECT_EQ(db_->Scalar("SELECT type || ' ' || sequence || ' ' || producer FROM outbox ORDER BY sequence DESC LIMIT 1"),
            "payments.charge.captured.v1 2 charge-admin");
  EXPECT_EQ(db_->Scalar("SELECT (payload->'resolution')::text FROM outbox WHERE sequence = 2"),
            R"({"decided_by":"operator","operator":"alice"})");
  EXPECT_EQ(db_->Scalar("SELECT payload->>'acquirer_capture_id' FROM outbox WHERE sequence = 2"), "cap_live");
  // The audit row: who, when (the event's time), why, before, after, what the acquirer said.
  EXPECT_EQ(db_->Scalar("SELECT operator || '|' || action || '|' || subject || '|' || before || '|' || after || '|' || "
                        "acquirer_said || '|' || against_acquirer FROM operator_actions"),
            "alice|review.resolve|" + c.public_id() +
                "|needs_review (acquirer_capture_contradicts_failed)|captured|a live capture cap_live of 25000 "
                "BRL|false");
  EXPECT_EQ(db_->Scalar("SELECT (SELECT at FROM operator_actions) = (SELECT created_at FROM outbox WHERE sequence = 2)"),
            "t");
  // A replay of the key answers what the state now calls for: no stored first response survives.
  EXPECT_EQ(db_->Scalar("SELECT response_status IS NULL AND response_body IS NULL FROM charges"), "t");
}

TEST_F(ReviewStoreTest, EachStateKeepsOnlyTheFieldsItsEventCarries) {
  const auto c = InReview(kMerchantA, "k1", "not_found_at_acquirer");
  db_->Execute("UPDATE charges SET decline_code = 'card_declined'");
  auto d = Decision(c, ChargeStatus::kFailed, "not_found_at_acquirer");
  const auto r = Await(review_->Resolve(d));
  ASSERT_TRUE(r.has_value() && r->applied);
  // failed: no capture id (the schema has none), the decline code kept, the operator's reason.
  EXPECT_EQ(db_->Scalar("SELECT (payload::jsonb ? 'acquirer_capture_id')::text || ' ' || (payload->>'decline_code') || ' ' || "
                        "(payload->>'failure_reason') FROM outbox WHERE sequence = 2"),
            "false card_declined operator_decision");

  const auto c2 = InReview(kMerchantA, "k2", "void_unconfirmed");
  db_->Execute("UPDATE charges SET decline_code = 'card_declined' WHERE id = '" + c2.id + "'");
  const auto r2 = Await(review_->Resolve(Decision(c2, ChargeStatus::kCanceled, "void_unconfirmed")));
  ASSERT_TRUE(r2.has_value() && r2->applied);
  EXPECT_EQ(db_->Scalar("SELECT (payload::jsonb ? 'decline_code')::text || ' ' || (payload->>'acquirer_capture_id') || ' ' || "
                        "(payload->>'failure_reason') FROM outbox WHERE aggregateid = '" + c2.public_id() +
                        "' AND sequence = 2"),
            "false cap_live operator_decision");
}

TEST_F(ReviewStoreTest, TwoDecisionsAtOnceOneLandsAndTheOtherSeesWhatWon) {
  const auto c = InReview(kMerchantA, "k1", "deadline_passed_unconfirmed");
  // Many rounds of two decisions started together, on two connections: exactly one lands each time.
  for (int round = 0; round < 20; ++round) {
    if (round > 0) {
      db_->Execute("UPDATE charges SET status = 'needs_review', failure_reason = 'deadline_passed_unconfirmed'");
    }
    db::DbResult<ResolveResult> a, b;
    std::thread ta([&] { a = Await(review_->Resolve(Decision(c, ChargeStatus::kCanceled, "deadline_passed_unconfirmed"))); });
    std::thread tb([&] { b = Await(review_->Resolve(Decision(c, ChargeStatus::kFailed, "deadline_passed_unconfirmed"))); });
    ta.join();
    tb.join();
    ASSERT_TRUE(a.has_value() && b.has_value());
    ASSERT_NE(a->applied, b->applied) << "round " << round;
    const auto& winner = a->applied ? *a : *b;
    const auto& loser = a->applied ? *b : *a;
    EXPECT_EQ(loser.charge.status, winner.charge.status) << "the loser reads what won";
  }
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM operator_actions"), "20");
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM outbox WHERE sequence > 1"), "20");
}

TEST_F(ReviewStoreTest, ADecisionTakenOnAnotherReviewThanTheOneNowOnRecordDoesNotLand) {
  const auto c = InReview(kMerchantA, "k1", "void_unconfirmed");
  const auto r = Await(review_->Resolve(Decision(c, ChargeStatus::kCanceled, "deadline_passed_unconfirmed")));
  ASSERT_TRUE(r.has_value());
  EXPECT_FALSE(r->applied);
  EXPECT_EQ(r->charge.status, ChargeStatus::kNeedsReview);
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM operator_actions"), "0");
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM outbox"), "1");
}

TEST_F(ReviewStoreTest, ACapturedDoesNotLandOnceAVoidOfTheChargeIsOnRecordUnlessAgainstTheAcquirer) {
  const auto c = InReview(kMerchantA, "k1", "deadline_passed_unconfirmed");
  // Another person's `canceled` (or the reconciler past the deadline) has sent a void.
  ASSERT_TRUE(Await(charges_->StartAttempt(c.id, {RequestId("void"), acquirer::Operation::kVoid, "charge-admin",
                                                  std::nullopt, {}, true}))
                  ->attempt_no > 0);
  auto d = Decision(c, ChargeStatus::kCaptured, "deadline_passed_unconfirmed");
  const auto r = Await(review_->Resolve(d));
  ASSERT_TRUE(r.has_value());
  EXPECT_FALSE(r->applied);
  EXPECT_EQ(r->charge.status, ChargeStatus::kNeedsReview);
  d.against_acquirer = true;
  const auto overridden = Await(review_->Resolve(d));
  ASSERT_TRUE(overridden.has_value());
  EXPECT_TRUE(overridden->applied);
  EXPECT_EQ(db_->Scalar("SELECT against_acquirer FROM operator_actions"), "t");
}

TEST_F(ReviewStoreTest, ADecisionDoesNotLandOnceAVoidWasRecordedSinceItReadTheCharge) {
  const auto c = InReview(kMerchantA, "k1", "deadline_passed_unconfirmed");
  const auto seen = Await(review_->VoidsOnRecord(c.id));
  ASSERT_TRUE(seen.has_value());
  EXPECT_EQ(*seen, 0);
  // A lookup changes nothing a decision rests on.
  ASSERT_TRUE(Await(charges_->StartAttempt(c.id, {RequestId("lookup"), acquirer::Operation::kLookup, "charge-admin",
                                                  std::nullopt, {}}))
                  .has_value());
  EXPECT_EQ(*Await(review_->VoidsOnRecord(c.id)), 0);
  // Another person's void does.
  ASSERT_TRUE(Await(charges_->StartAttempt(c.id, {RequestId("void"), acquirer::Operation::kVoid, "charge-admin",
                                                  std::nullopt, {}, true}))
                  .has_value());
  EXPECT_EQ(*Await(review_->VoidsOnRecord(c.id)), 1);
  auto d = Decision(c, ChargeStatus::kFailed, "deadline_passed_unconfirmed");
  d.voids_seen = *seen;
  const auto stale = Await(review_->Resolve(d));
  ASSERT_TRUE(stale.has_value());
  EXPECT_FALSE(stale->applied) << "it rests on an answer the void may have made stale";
  d.to = ChargeStatus::kCanceled;
  d.capture_id = "cap_live";
  d.voids_seen = 1;
  const auto current = Await(review_->Resolve(d));
  ASSERT_TRUE(current.has_value());
  EXPECT_TRUE(current->applied);
}

TEST_F(ReviewStoreTest, AVoidWithoutALeaseIsRecordedOnlyOnAChargeInReview) {
  const auto c = InReview(kMerchantA, "k1", "deadline_passed_unconfirmed");
  db_->Execute("UPDATE charges SET status = 'captured', failure_reason = NULL");
  const auto refused = Await(charges_->StartAttempt(c.id, {RequestId("void"), acquirer::Operation::kVoid,
                                                          "charge-admin", std::nullopt, {}, true}));
  ASSERT_TRUE(refused.has_value());
  EXPECT_TRUE(refused->refused.has_value()) << "a person's void of a charge another decision already settled";
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM acquirer_attempts WHERE operation = 'void'"), "0");
}

TEST_F(ReviewStoreTest, TheListShowsChargesInReviewLongestFirstByMerchantReasonAndAge) {
  const auto a = InReview(kMerchantA, "k1", "void_unconfirmed");
  const auto b = InReview(kMerchantA, "k2", "acquirer_capture_voided");
  const auto other = InReview(kMerchantB, "k3", "void_unconfirmed");
  InReview(kMerchantA, "k4", "void_unconfirmed");
  db_->Execute("UPDATE charges SET status = 'captured', failure_reason = NULL WHERE idempotency_key = 'k4'");
  db_->Execute("UPDATE charges SET updated_at = now() - interval '3 hours' WHERE idempotency_key = 'k2'");
  db_->Execute("UPDATE charges SET updated_at = now() - interval '2 hours' WHERE idempotency_key = 'k1'");

  const auto all = Await(review_->List({}));
  ASSERT_TRUE(all.has_value());
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].charge.id, b.id);
  EXPECT_EQ((*all)[1].charge.id, a.id);
  EXPECT_EQ((*all)[2].charge.id, other.id);
  EXPECT_GE((*all)[0].in_review_for, std::chrono::hours{3});

  const auto by_merchant = Await(review_->List({.merchant_id = kMerchantB}));
  ASSERT_TRUE(by_merchant.has_value());
  ASSERT_EQ(by_merchant->size(), 1u);
  EXPECT_EQ((*by_merchant)[0].charge.id, other.id);

  const auto by_reason = Await(review_->List({.reason = "void_unconfirmed", .older_than = std::chrono::hours{1}}));
  ASSERT_TRUE(by_reason.has_value());
  ASSERT_EQ(by_reason->size(), 1u);
  EXPECT_EQ((*by_reason)[0].charge.id, a.id);

  const auto counts = Await(review_->CountByReason());
  ASSERT_TRUE(counts.has_value());
  const std::vector<std::pair<std::string, std::int64_t>> expected{{"acquirer_capture_voided", 1},
                                                                   {"void_unconfirmed", 2}};
  EXPECT_EQ(*counts, expected);
}

TEST_F(ReviewStoreTest, TheHistoryHoldsEveryAttemptEventAndActionOfTheCharge) {
  const auto c = InReview(kMerchantA, "k1", "acquirer_capture_contradicts_failed", "ORDER-7");
  InReview(kMerchantA, "k2", "void_unconfirmed", "ORDER-7");
  ASSERT_TRUE(Await(review_->Resolve(Decision(c, ChargeStatus::kCaptured, "acquirer_capture_contradicts_failed")))
                  ->applied);
  db_->Execute("UPDATE outbox SET published_at = now() WHERE sequence = 1");

  const auto found = Await(review_->Find(c.id));
  ASSERT_TRUE(found.has_value() && found->has_value());
  const auto h = Await(review_->History(**found));
  ASSERT_TRUE(h.has_value()) << h.error().detail;
  ASSERT_EQ(h->attempts.size(), 1u);
  EXPECT_EQ(h->attempts[0].operation, "capture");
  EXPECT_EQ(h->attempts[0].actor, "charge-api");
  EXPECT_FALSE(h->attempts[0].finished_at.has_value());
  ASSERT_EQ(h->events.size(), 2u);
  EXPECT_EQ(h->events[0].type, "payments.charge.initiated.v1");
  EXPECT_TRUE(h->events[0].published_at.has_value());
  EXPECT_EQ(h->events[1].type, "payments.charge.captured.v1");
  EXPECT_EQ(h->events[1].producer, "charge-admin");
  EXPECT_FALSE(h->events[1].published_at.has_value());
  ASSERT_EQ(h->actions.size(), 1u);
  EXPECT_EQ(h->actions[0].operator_name, "alice");
  EXPECT_EQ(h->actions[0].after, "captured");

  const auto last = Await(review_->LastResolution(c.public_id()));
  ASSERT_TRUE(last.has_value() && last->has_value());
  EXPECT_EQ((*last)->after, "captured");

  const auto by_order = Await(review_->FindByOrder(kMerchantA, "ORDER-7"));
  ASSERT_TRUE(by_order.has_value());
  EXPECT_EQ(by_order->size(), 2u);
  EXPECT_TRUE(Await(review_->FindByOrder(kMerchantB, "ORDER-7"))->empty()) << "orders are scoped per merchant";
}

TEST_F(ReviewStoreTest, PruningDeletesOnlyAuditRowsOlderThanTheRetentionABatchAtATime) {
  db_->Execute("INSERT INTO operator_actions (at, operator, action, subject, reason)"
               " SELECT now() - interval '8 years' + i * interval '1 second', 'alice', 'review.resolve', 'ch_' || i, 'r'"
               " FROM generate_series(1, 5) AS i");
  db_->Execute("INSERT INTO operator_actions (at, operator, action, subject, reason)"
               " VALUES (now() - interval '6 years', 'bob', 'review.resolve', 'ch_recent', 'r')");
  const auto seven_years = std::chrono::hours{24 * 2555};
  const auto first = Await(review_->PruneActions(seven_years, 3));
  ASSERT_TRUE(first.has_value()) << first.error().detail;
  EXPECT_EQ(*first, 3);
  EXPECT_EQ(*Await(review_->PruneActions(seven_years, 3)), 2);
  EXPECT_EQ(*Await(review_->PruneActions(seven_years, 3)), 0);
  EXPECT_EQ(db_->Scalar("SELECT string_agg(subject, ',') FROM operator_actions"), "ch_recent");
}

}  // namespace
}  // namespace charge_outbox::charges
