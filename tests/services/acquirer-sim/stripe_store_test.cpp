// The store's Stripe half: the idempotency layer (replay, mismatch, in flight, pruning), search lag,
// newest-first listing, refunds, events, the shared ledger, and rebuilding all of it from the log.
#include <gtest/gtest.h>

#include <sstream>

#include "capture_store.hpp"
#include "store_fakes.hpp"

namespace charge_outbox::acquirer_sim {
namespace {

constexpr std::int64_t kDay = 86'400'000'000;

CaptureRequest Req(std::string charge_id, std::int64_t amount = 1000) {
  return {amount, "BRL", std::move(charge_id), "pm_tok_visa"};
}

StripeAnswer Echo(const PaymentIntent& intent) { return {200, intent.id}; }

class StripeStoreTest : public ::testing::Test {
 protected:
  StripeStoreTest() : store_(sink_, clock_, 5) {
    a_ = store_.InternMerchant("m_a");
    b_ = store_.InternMerchant("m_b");
  }

  // Begin (with a key) + create; returns the PaymentIntent.
  PaymentIntent Create(MerchantIndex m, const std::string& key, const CaptureRequest& r, IntentOptions options = {}) {
    if (!key.empty()) {
      EXPECT_EQ(store_.BeginStripeKey(m, key, "params:" + r.reference, kDay).outcome, StripeBeginOutcome::kProceed);
    }
    auto made = store_.CreateIntent(m, key, r, options, Echo);
    EXPECT_TRUE(made.has_value());
    return made ? made->first : PaymentIntent{};
  }

  std::vector<std::string> Ids(const std::vector<PaymentIntent>& intents) {
    std::vector<std::string> ids;
    for (const auto& intent : intents) ids.push_back(intent.id);
    return ids;
  }

  MemorySink sink_;
  FakeClock clock_;
  CaptureStore store_;
  MerchantIndex a_ = 0;
  MerchantIndex b_ = 0;
};

TEST_F(StripeStoreTest, AStoredAnswerIsReplayedForTheSameParamsAndRefusedForOthers) {
  const auto intent = Create(a_, "k1", Req("ch_1"));
  const auto again = store_.BeginStripeKey(a_, "k1", "params:ch_1", kDay);
  EXPECT_EQ(again.outcome, StripeBeginOutcome::kReplay);
  EXPECT_EQ(again.answer.status, 200u);
  EXPECT_EQ(again.answer.body, intent.id);
  EXPECT_EQ(store_.BeginStripeKey(a_, "k1", "params:other", kDay).outcome, StripeBeginOutcome::kMismatch);
  // Keys are per merchant.
  EXPECT_EQ(store_.BeginStripeKey(b_, "k1", "params:other", kDay).outcome, StripeBeginOutcome::kProceed);
  EXPECT_EQ(store_.InFlightCount(), 1u);
  store_.AbandonStripeKey(b_, "k1");
  EXPECT_EQ(store_.InFlightCount(), 0u);
}

TEST_F(StripeStoreTest, AKeyInFlightIsInUseThenFreeIfAbandoned) {
  EXPECT_EQ(store_.BeginStripeKey(a_, "k", "p", kDay).outcome, StripeBeginOutcome::kProceed);
  EXPECT_EQ(store_.BeginStripeKey(a_, "k", "p", kDay).outcome, StripeBeginOutcome::kInFlight);
  EXPECT_EQ(store_.BeginStripeKey(a_, "k", "q", kDay).outcome, StripeBeginOutcome::kMismatch);
  store_.AbandonStripeKey(a_, "k");
  EXPECT_EQ(store_.BeginStripeKey(a_, "k", "q", kDay).outcome, StripeBeginOutcome::kProceed);
}

TEST_F(StripeStoreTest, AKeyOlderThanTheRetentionIsForgottenAndMakesANewPaymentIntent) {
  const auto first = Create(a_, "k", Req("ch_1"));
  clock_.now += 5'000'000;
  EXPECT_EQ(store_.BeginStripeKey(a_, "k", "params:ch_1", 5'000'001).outcome, StripeBeginOutcome::kReplay);
  EXPECT_EQ(store_.BeginStripeKey(a_, "k", "params:ch_1", 5'000'000).outcome, StripeBeginOutcome::kProceed);
  const auto second = store_.CreateIntent(a_, "k", Req("ch_1"), {}, Echo);
  ASSERT_TRUE(second);
  EXPECT_NE(second->first.id, first.id);
  EXPECT_EQ(store_.Ledger().size(), 2u);
  EXPECT_EQ(store_.SearchIntents(a_, "ch_1").size(), 2u);
}

TEST_F(StripeStoreTest, AnAnswerWithoutStateIsStoredAndReplayed) {
  ASSERT_EQ(store_.BeginStripeKey(a_, "k", "p", kDay).outcome, StripeBeginOutcome::kProceed);
  ASSERT_TRUE(store_.StoreStripeAnswer(a_, "k", {500, "boom"}));
  const auto replay = store_.BeginStripeKey(a_, "k", "p", kDay);
  EXPECT_EQ(replay.outcome, StripeBeginOutcome::kReplay);
  EXPECT_EQ(replay.answer.status, 500u);
  EXPECT_TRUE(store_.Ledger().empty());
}

TEST_F(StripeStoreTest, AStorageFailureMakesNothingAndFreesTheKey) {
  ASSERT_EQ(store_.BeginStripeKey(a_, "k", "p", kDay).outcome, StripeBeginOutcome::kProceed);
  sink_.fail = true;
  EXPECT_FALSE(store_.CreateIntent(a_, "k", Req("ch_1"), {}, Echo));
  sink_.fail = false;
  EXPECT_EQ(store_.InFlightCount(), 0u);
  EXPECT_EQ(store_.BeginStripeKey(a_, "k", "p", kDay).outcome, StripeBeginOutcome::kProceed);
  EXPECT_TRUE(store_.Ledger().empty());
}

TEST_F(StripeStoreTest, SearchWaitsOutTheLagWhileRetrieveAndListSeeItAtOnce) {
  IntentOptions lagging;
  lagging.search_lag_us = 2'000'000;
  const auto intent = Create(a_, "k", Req("ch_1"), lagging);
  EXPECT_TRUE(store_.SearchIntents(a_, "ch_1").empty());
  EXPECT_TRUE(store_.RetrieveIntent(a_, intent.id));
  EXPECT_EQ(store_.ListIntents(a_, {}, "", 10).data.size(), 1u);
  clock_.now += 2'000'000;
  EXPECT_EQ(Ids(store_.SearchIntents(a_, "ch_1")), std::vector<std::string>{intent.id});
  EXPECT_TRUE(store_.SearchIntents(b_, "ch_1").empty());
  EXPECT_FALSE(store_.RetrieveIntent(b_, intent.id));
}

TEST_F(StripeStoreTest, VisibilityDelayHidesFromRetrieveListAndSearch) {
  IntentOptions hidden;
  hidden.visibility_delay_us = 1'000'000;
  const auto intent = Create(a_, "", Req("ch_1"), hidden);
  EXPECT_FALSE(store_.RetrieveIntent(a_, intent.id));
  EXPECT_TRUE(store_.ListIntents(a_, {}, "", 10).data.empty());
  EXPECT_TRUE(store_.SearchIntents(a_, "ch_1").empty());
  clock_.now += 1'000'000;
  EXPECT_TRUE(store_.RetrieveIntent(a_, intent.id));
  EXPECT_EQ(store_.SearchIntents(a_, "ch_1").size(), 1u);
}

TEST_F(StripeStoreTest, ListIsNewestFirstAndStableAcrossPagesWhileNewOnesArrive) {
  std::vector<std::string> made;
  for (int i = 0; i < 5; ++i) {
    made.push_back(Create(a_, "", Req("ch_" + std::to_string(i))).id);  // all in the same second
  }
  Create(b_, "", Req("other"));
  const auto first = store_.ListIntents(a_, {}, "", 2);
  EXPECT_EQ(Ids(first.data), (std::vector<std::string>{made[4], made[3]}));
  EXPECT_TRUE(first.has_more);
  Create(a_, "", Req("newer"));  // newer: never after a cursor
  const auto second = store_.ListIntents(a_, {}, first.data.back().id, 2);
  EXPECT_EQ(Ids(second.data), (std::vector<std::string>{made[2], made[1]}));
  const auto third = store_.ListIntents(a_, {}, second.data.back().id, 2);
  EXPECT_EQ(Ids(third.data), (std::vector<std::string>{made[0]}));
  EXPECT_FALSE(third.has_more);
  EXPECT_TRUE(store_.ListIntents(a_, {}, "pi_unknown", 2).unknown_cursor);
  EXPECT_TRUE(store_.ListIntents(b_, {}, made[0], 2).unknown_cursor);  // another merchant's
}

TEST_F(StripeStoreTest, ListKeepsToTheCreatedRange) {
  const auto early = Create(a_, "", Req("early"));
  clock_.now += 10'000'000;
  const auto late = Create(a_, "", Req("late"));
  const std::int64_t late_second = late.created_at_us / 1'000'000 * 1'000'000;
  EXPECT_EQ(Ids(store_.ListIntents(a_, {late_second, CreatedRange{}.to_us}, "", 10).data),
            std::vector<std::string>{late.id});
  EXPECT_EQ(Ids(store_.ListIntents(a_, {CreatedRange{}.from_us, late_second}, "", 10).data),
            std::vector<std::string>{early.id});
}

TEST_F(StripeStoreTest, DeclinedPaymentIntentsAreListedAndSearchedButNotInTheLedger) {
  IntentOptions declined;
  declined.decline_code = "insufficient_funds";
  const auto intent = Create(a_, "k", Req("ch_1"), declined);
  EXPECT_FALSE(intent.succeeded());
  EXPECT_EQ(store_.SearchIntents(a_, "ch_1").at(0).decline_code, "insufficient_funds");
  EXPECT_EQ(store_.ListIntents(a_, {}, "", 10).data.size(), 1u);
  EXPECT_TRUE(store_.Ledger().empty());
  EXPECT_EQ(store_.Refund(a_, "r", intent.id, std::nullopt, Echo).outcome, RefundOutcome::kNotSucceeded);
  const auto events = store_.ListEvents(a_, {}, {}, "", 10);
  ASSERT_EQ(events.data.size(), 1u);
  EXPECT_EQ(events.data[0].type, StripeEventType::kPaymentIntentPaymentFailed);
}

TEST_F(StripeStoreTest, ARefundVoidsTheLedgerCaptureOnceAndWritesAnEvent) {
  const auto intent = Create(a_, "k", Req("ch_1", 700));
  EXPECT_EQ(store_.Refund(b_, "r", intent.id, std::nullopt, Echo).outcome, RefundOutcome::kNotFound);
  EXPECT_EQ(store_.Refund(a_, "r", intent.id, 699, Echo).outcome, RefundOutcome::kAmountMismatch);
  const auto refunded = store_.Refund(a_, "r", intent.id, 700, Echo);
  ASSERT_EQ(refunded.outcome, RefundOutcome::kRefunded);
  EXPECT_EQ(store_.Refund(a_, "r2", intent.id, std::nullopt, Echo).outcome, RefundOutcome::kAlreadyRefunded);
  const auto ledger = store_.Ledger();
  ASSERT_EQ(ledger.size(), 2u);
  EXPECT_EQ(ledger[1].type, RecordType::kVoid);
  EXPECT_EQ(ledger[1].capture.id, intent.id);
  EXPECT_EQ(ledger[1].idempotency_key, "r");
  EXPECT_NE(store_.RetrieveIntent(a_, intent.id)->refunded_at_us, 0);

  const auto refunds = store_.ListEvents(a_, {StripeEventType::kChargeRefunded}, {}, "", 10);
  ASSERT_EQ(refunds.data.size(), 1u);
  EXPECT_EQ(refunds.data[0].idempotency_key, "r");
  const auto all = store_.ListEvents(a_, {}, {}, "", 1);
  EXPECT_EQ(all.data.at(0).type, StripeEventType::kChargeRefunded);  // newest first
  EXPECT_TRUE(all.has_more);
  const auto next = store_.ListEvents(a_, {}, {}, all.data[0].id, 1);
  EXPECT_EQ(next.data.at(0).type, StripeEventType::kPaymentIntentSucceeded);
  EXPECT_EQ(next.data.at(0).idempotency_key, "k");
  EXPECT_FALSE(next.has_more);
}

TEST_F(StripeStoreTest, OurDialectNeverSeesStripePaymentIntents) {
  const auto intent = Create(a_, "k", Req("ch_1"));
  EXPECT_FALSE(store_.LookupById(a_, intent.id));
  EXPECT_FALSE(store_.LookupByKey(a_, "k"));
  EXPECT_TRUE(store_.List(a_, 0, std::numeric_limits<std::int64_t>::max(), 0, 10).captures.empty());
  EXPECT_EQ(store_.Void(a_, "v", intent.id).outcome, VoidOutcome::kNotFound);
  // And a Stripe key does not collide with a capture key of ours.
  EXPECT_EQ(store_.BeginCapture(a_, "k", Req("ch_1")).outcome, BeginOutcome::kProceed);
}

TEST_F(StripeStoreTest, TheLogRebuildsPaymentIntentsRefundsEventsAndStoredAnswers) {
  const auto captured = Create(a_, "k1", Req("ch_1"));
  IntentOptions declined;
  declined.decline_code = "card_declined";
  IntentOptions lagging;
  lagging.search_lag_us = 60'000'000;
  const auto failed = Create(a_, "k2", Req("ch_2"), declined);
  const auto keyless = Create(b_, "", Req("ch_3"), lagging);
  ASSERT_EQ(store_.BeginStripeKey(a_, "r1", "refund", kDay).outcome, StripeBeginOutcome::kProceed);
  ASSERT_EQ(store_.Refund(a_, "r1", captured.id, std::nullopt, Echo).outcome, RefundOutcome::kRefunded);
  ASSERT_EQ(store_.BeginStripeKey(a_, "e1", "nothing", kDay).outcome, StripeBeginOutcome::kProceed);
  ASSERT_TRUE(store_.StoreStripeAnswer(a_, "e1", {500, "{\"error\":{}}"}));
  // Our dialect's records sit in the same log.
  ASSERT_EQ(store_.BeginCapture(a_, "ours", Req("ch_9")).outcome, BeginOutcome::kProceed);
  ASSERT_EQ(store_.CompleteCapture(a_, "ours", Req("ch_9"), std::nullopt, 0).outcome, CompleteOutcome::kCaptured);

  MemorySink replayed_sink;
  CaptureStore replayed(replayed_sink, clock_, 6);
  std::istringstream lines(sink_.data);
  std::string line;
  while (std::getline(lines, line)) {
    const auto record = DecodeRecord(line);
    ASSERT_TRUE(record.has_value()) << line;
    replayed.Apply(*record);
  }
  const MerchantIndex a = replayed.InternMerchant("m_a");
  const MerchantIndex b = replayed.InternMerchant("m_b");

  const auto ledger = store_.Ledger();
  const auto rebuilt = replayed.Ledger();
  ASSERT_EQ(rebuilt.size(), ledger.size());
  for (std::size_t i = 0; i < ledger.size(); ++i) {
    EXPECT_EQ(rebuilt[i].type, ledger[i].type);
    EXPECT_EQ(rebuilt[i].capture.id, ledger[i].capture.id);
    EXPECT_EQ(rebuilt[i].idempotency_key, ledger[i].idempotency_key);
  }
  EXPECT_EQ(replayed.RetrieveIntent(a, captured.id)->refund_idempotency_key, "r1");
  EXPECT_EQ(replayed.RetrieveIntent(a, failed.id)->decline_code, "card_declined");
  EXPECT_TRUE(replayed.SearchIntents(b, "ch_3").empty());  // the lag survives too
  EXPECT_TRUE(replayed.RetrieveIntent(b, keyless.id));
  EXPECT_EQ(replayed.BeginStripeKey(a, "k1", "params:ch_1", kDay).answer.body, captured.id);
  EXPECT_EQ(replayed.BeginStripeKey(a, "r1", "refund", kDay).outcome, StripeBeginOutcome::kReplay);
  EXPECT_EQ(replayed.BeginStripeKey(a, "e1", "nothing", kDay).answer.status, 500u);
  EXPECT_EQ(replayed.BeginCapture(a, "ours", Req("ch_9")).outcome, BeginOutcome::kReplayCaptured);
  const auto events = replayed.ListEvents(a, {}, {}, "", 10);
  const auto original = store_.ListEvents(a_, {}, {}, "", 10);
  ASSERT_EQ(events.data.size(), 3u);
  for (std::size_t i = 0; i < events.data.size(); ++i) {
    EXPECT_EQ(events.data[i].id, original.data[i].id);
    EXPECT_EQ(events.data[i].request_id, original.data[i].request_id);
  }
  // New ids after a restart never collide with replayed ones, and time keeps increasing.
  const auto after = replayed.CreateIntent(a, "", Req("ch_1"), {}, Echo);
  ASSERT_TRUE(after);
  EXPECT_GT(after->first.created_at_us, ledger.back().at_us);
}

TEST_F(StripeStoreTest, ResetForgetsTheStripeStateToo) {
  const auto intent = Create(a_, "k", Req("ch_1"));
  ASSERT_TRUE(store_.Reset());
  EXPECT_FALSE(store_.RetrieveIntent(a_, intent.id));
  EXPECT_TRUE(store_.ListEvents(a_, {}, {}, "", 10).data.empty());
  EXPECT_EQ(store_.BeginStripeKey(a_, "k", "params:ch_1", kDay).outcome, StripeBeginOutcome::kProceed);
}

}  // namespace
}  // namespace charge_outbox::acquirer_sim
