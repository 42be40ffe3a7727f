// The store's idempotency rules, visibility, listing, voids and ledger, against an in-memory log and a
// clock the test moves.
#include "capture_store.hpp"
#include "store_fakes.hpp"

#include <gtest/gtest.h>

#include <set>

namespace charge_outbox::acquirer_sim {
namespace {

CaptureRequest Req(std::string reference, std::int64_t amount = 1000, std::string pm = "pm_tok_visa") {
  return {amount, "BRL", std::move(reference), std::move(pm)};
}

class CaptureStoreTest : public ::testing::Test {
 protected:
  CaptureStoreTest() : store_(sink_, clock_, 77) {
    a_ = store_.InternMerchant("m_a");
    b_ = store_.InternMerchant("m_b");
  }

  // Begin + Complete, expecting the capture to be made; returns its id.
  std::string Capture(MerchantIndex m, const std::string& key, const CaptureRequest& r, std::int64_t visibility_us = 0) {
    EXPECT_EQ(store_.BeginCapture(m, key, r).outcome, BeginOutcome::kProceed);
    auto done = store_.CompleteCapture(m, key, r, std::nullopt, visibility_us);
    EXPECT_EQ(done.outcome, CompleteOutcome::kCaptured);
    return done.id;
  }

  MemorySink sink_;
  FakeClock clock_;
  CaptureStore store_;
  MerchantIndex a_ = 0;
  MerchantIndex b_ = 0;
};

TEST_F(CaptureStoreTest, InternMerchantIsIdempotent) {
  EXPECT_EQ(store_.InternMerchant("m_a"), a_);
  EXPECT_NE(a_, b_);
  EXPECT_EQ(store_.MerchantId(b_), "m_b");
}

TEST_F(CaptureStoreTest, SameKeySameRequestReplaysTheCapture) {
  const auto id = Capture(a_, "k1", Req("ch_1"));
  EXPECT_EQ(id.size(), 28u);
  EXPECT_TRUE(id.starts_with("cap_"));
  const auto again = store_.BeginCapture(a_, "k1", Req("ch_1"));
  ASSERT_EQ(again.outcome, BeginOutcome::kReplayCaptured);
  EXPECT_EQ(again.capture->id, id);
  EXPECT_EQ(again.capture->request, Req("ch_1"));
  EXPECT_EQ(store_.CaptureCount(), 1u);
  EXPECT_EQ(sink_.Lines(), 1u);
}

TEST_F(CaptureStoreTest, SameKeyOtherRequestIsAMismatchWhateverTheState) {
  Capture(a_, "k1", Req("ch_1"));
  EXPECT_EQ(store_.BeginCapture(a_, "k1", Req("ch_1", 1001)).outcome, BeginOutcome::kMismatch);
  EXPECT_EQ(store_.BeginCapture(a_, "k1", Req("ch_2")).outcome, BeginOutcome::kMismatch);
  ASSERT_EQ(store_.BeginCapture(a_, "k2", Req("ch_3")).outcome, BeginOutcome::kProceed);
  EXPECT_EQ(store_.BeginCapture(a_, "k2", Req("ch_4")).outcome, BeginOutcome::kMismatch);
  EXPECT_EQ(store_.CaptureCount(), 1u);
}

TEST_F(CaptureStoreTest, SameKeyWhileInFlightIsInFlightUntilCompleted) {
  ASSERT_EQ(store_.BeginCapture(a_, "k1", Req("ch_1")).outcome, BeginOutcome::kProceed);
  EXPECT_EQ(store_.InFlightCount(), 1u);
  EXPECT_EQ(store_.BeginCapture(a_, "k1", Req("ch_1")).outcome, BeginOutcome::kInFlight);
  EXPECT_FALSE(store_.LookupByKey(a_, "k1").has_value());  // not captured yet
  store_.CompleteCapture(a_, "k1", Req("ch_1"), std::nullopt, 0);
  EXPECT_EQ(store_.InFlightCount(), 0u);
  EXPECT_EQ(store_.BeginCapture(a_, "k1", Req("ch_1")).outcome, BeginOutcome::kReplayCaptured);
}

TEST_F(CaptureStoreTest, AbandonReleasesTheKeyWithoutAnOutcome) {
  ASSERT_EQ(store_.BeginCapture(a_, "k1", Req("ch_1")).outcome, BeginOutcome::kProceed);
  store_.AbandonCapture(a_, "k1");
  EXPECT_EQ(store_.InFlightCount(), 0u);
  EXPECT_EQ(store_.BeginCapture(a_, "k1", Req("ch_other")).outcome, BeginOutcome::kProceed);
  EXPECT_EQ(sink_.Lines(), 0u);
}

TEST_F(CaptureStoreTest, KeysAreScopedPerMerchant) {
  const auto id_a = Capture(a_, "shared", Req("ch_a"));
  const auto id_b = Capture(b_, "shared", Req("ch_b", 5));
  EXPECT_NE(id_a, id_b);
  EXPECT_EQ(store_.LookupByKey(a_, "shared")->id, id_a);
  EXPECT_EQ(store_.LookupByKey(b_, "shared")->id, id_b);
  EXPECT_FALSE(store_.LookupById(b_, id_a).has_value());
  EXPECT_EQ(store_.Void(b_, "v", id_a).outcome, VoidOutcome::kNotFound);
  EXPECT_EQ(store_.List(b_, INT64_MIN, INT64_MAX, 0, 10).captures.size(), 1u);
}

TEST_F(CaptureStoreTest, DeclinesReplayAreDurableAndAreNotCaptures) {
  ASSERT_EQ(store_.BeginCapture(a_, "d1", Req("ch_d")).outcome, BeginOutcome::kProceed);
  const auto done = store_.CompleteCapture(a_, "d1", Req("ch_d"), std::string("card_declined"), 0);
  EXPECT_EQ(done.outcome, CompleteOutcome::kDeclined);
  const auto again = store_.BeginCapture(a_, "d1", Req("ch_d"));
  EXPECT_EQ(again.outcome, BeginOutcome::kReplayDeclined);
  EXPECT_EQ(again.decline_code, "card_declined");
  EXPECT_EQ(store_.BeginCapture(a_, "d1", Req("ch_d", 2)).outcome, BeginOutcome::kMismatch);
  EXPECT_FALSE(store_.LookupByKey(a_, "d1").has_value());
  EXPECT_TRUE(store_.Ledger().empty());
  EXPECT_EQ(sink_.Lines(), 1u);
}

TEST_F(CaptureStoreTest, StorageFailureCapturesNothingAndReleasesTheKey) {
  sink_.fail = true;
  ASSERT_EQ(store_.BeginCapture(a_, "k1", Req("ch_1")).outcome, BeginOutcome::kProceed);
  EXPECT_EQ(store_.CompleteCapture(a_, "k1", Req("ch_1"), std::nullopt, 0).outcome, CompleteOutcome::kStorageFailed);
  EXPECT_EQ(store_.CaptureCount(), 0u);
  EXPECT_EQ(store_.InFlightCount(), 0u);
  EXPECT_FALSE(store_.LookupByKey(a_, "k1").has_value());
  sink_.fail = false;
  EXPECT_EQ(store_.BeginCapture(a_, "k1", Req("ch_1")).outcome, BeginOutcome::kProceed);
}

TEST_F(CaptureStoreTest, VisibilityDelayHidesACaptureFromReadersButNotFromReplays) {
  const auto id = Capture(a_, "k1", Req("ch_1"), 2'000'000);
  EXPECT_FALSE(store_.LookupByKey(a_, "k1").has_value());
  EXPECT_FALSE(store_.LookupById(a_, id).has_value());
  EXPECT_TRUE(store_.List(a_, INT64_MIN, INT64_MAX, 0, 10).captures.empty());
  EXPECT_EQ(store_.BeginCapture(a_, "k1", Req("ch_1")).outcome, BeginOutcome::kReplayCaptured);
  clock_.now += 1'999'999;
  EXPECT_FALSE(store_.LookupByKey(a_, "k1").has_value());
  clock_.now += 1;
  EXPECT_EQ(store_.LookupByKey(a_, "k1")->id, id);
  EXPECT_EQ(store_.List(a_, INT64_MIN, INT64_MAX, 0, 10).captures.size(), 1u);
}

TEST_F(CaptureStoreTest, CreatedAtIsStrictlyIncreasingEvenWithAFrozenClock) {
  Capture(a_, "k1", Req("1"));
  Capture(a_, "k2", Req("2"));
  clock_.now -= 1'000'000;  // the wall clock steps back
  Capture(a_, "k3", Req("3"));
  clock_.now += 2'000'000;  // and forward again, so that all three are visible
  const auto all = store_.List(a_, INT64_MIN, INT64_MAX, 0, 10).captures;
  ASSERT_EQ(all.size(), 3u);
  EXPECT_LT(all[0].created_at_us, all[1].created_at_us);
  EXPECT_LT(all[1].created_at_us, all[2].created_at_us);
}

TEST_F(CaptureStoreTest, ListPagesThroughATimeWindowInCreationOrder) {
  std::vector<std::string> ids;
  for (int i = 0; i < 10; ++i) {
    ids.push_back(Capture(a_, "k" + std::to_string(i), Req("ch_" + std::to_string(i))));
    Capture(b_, "k" + std::to_string(i), Req("other"));  // another merchant's captures interleave
    clock_.now += 1000;
  }
  const auto all = store_.List(a_, INT64_MIN, INT64_MAX, 0, 100).captures;
  ASSERT_EQ(all.size(), 10u);
  const std::int64_t from = all[2].created_at_us;
  const std::int64_t to = all[9].created_at_us;  // exclusive: captures 2..8
  std::vector<std::string> seen;
  std::uint64_t cursor = 0;
  int pages = 0;
  for (;;) {
    const auto page = store_.List(a_, from, to, cursor, 3);
    for (const auto& c : page.captures) seen.push_back(c.id);
    ++pages;
    if (!page.next_cursor) break;
    cursor = *page.next_cursor;
    ASSERT_LT(pages, 10);
  }
  EXPECT_EQ(pages, 3);  // 3 + 3 + 1
  EXPECT_EQ(seen, std::vector<std::string>(ids.begin() + 2, ids.begin() + 9));
}

TEST_F(CaptureStoreTest, ExactlyFullLastPageHasNoNextCursor) {
  for (int i = 0; i < 4; ++i) Capture(a_, "k" + std::to_string(i), Req("r"));
  const auto first = store_.List(a_, INT64_MIN, INT64_MAX, 0, 2);
  ASSERT_TRUE(first.next_cursor.has_value());
  const auto second = store_.List(a_, INT64_MIN, INT64_MAX, *first.next_cursor, 2);
  EXPECT_EQ(second.captures.size(), 2u);
  EXPECT_FALSE(second.next_cursor.has_value());
}

TEST_F(CaptureStoreTest, ALiveCapturePastTheVoidWindowHasSettledAndIsNotVoided) {
  const auto old = Capture(a_, "k-old", Req("ch_old"));
  clock_.now += 1'000;
  const auto young = Capture(a_, "k-young", Req("ch_young"));
  clock_.now += 500;
  EXPECT_EQ(store_.Void(a_, "v-old", old, 1'000).outcome, VoidOutcome::kSettled);
  EXPECT_EQ(store_.LookupByKey(a_, "k-old")->voided_at_us, 0) << "nothing was voided";
  EXPECT_EQ(store_.Ledger().size(), 2u);
  EXPECT_EQ(store_.Void(a_, "v-young", young, 1'000).outcome, VoidOutcome::kVoided);
  clock_.now += 5'000;
  // A void already made replays past the window: settlement does not undo it.
  EXPECT_EQ(store_.Void(a_, "v-young", young, 1'000).outcome, VoidOutcome::kAlreadyVoided);
  EXPECT_EQ(store_.Void(a_, "v-old", old, 0).outcome, VoidOutcome::kVoided) << "0: no window";
}

TEST_F(CaptureStoreTest, VoidIsIdempotentAndKeysAreCheckedAgainstTheCapture) {
  const auto id1 = Capture(a_, "k1", Req("ch_1"));
  const auto id2 = Capture(a_, "k2", Req("ch_2"));
  clock_.now += 5;
  const auto voided = store_.Void(a_, "v1", id1);
  ASSERT_EQ(voided.outcome, VoidOutcome::kVoided);
  EXPECT_EQ(voided.capture->voided_at_us, clock_.now);
  EXPECT_EQ(store_.Void(a_, "v1", id1).outcome, VoidOutcome::kAlreadyVoided);
  EXPECT_EQ(store_.Void(a_, "v-other", id1).outcome, VoidOutcome::kAlreadyVoided);
  EXPECT_EQ(store_.Void(a_, "v1", id2).outcome, VoidOutcome::kMismatch);
  EXPECT_EQ(store_.Void(a_, "v3", "cap_missing").outcome, VoidOutcome::kNotFound);
  EXPECT_NE(store_.LookupByKey(a_, "k1")->voided_at_us, 0);
  EXPECT_EQ(store_.LookupByKey(a_, "k2")->voided_at_us, 0);
  // The same key for a capture and for a void does not collide: they are separate scopes.
  EXPECT_EQ(store_.Void(a_, "k2", id2).outcome, VoidOutcome::kVoided);

  const auto ledger = store_.Ledger();
  ASSERT_EQ(ledger.size(), 4u);  // two captures, two voids
  EXPECT_EQ(ledger[0].type, RecordType::kCapture);
  EXPECT_EQ(ledger[2].type, RecordType::kVoid);
  EXPECT_EQ(ledger[2].capture.id, id1);
  EXPECT_EQ(ledger[2].idempotency_key, "v1");
  EXPECT_EQ(ledger[3].idempotency_key, "k2");
}

TEST_F(CaptureStoreTest, ReplayingTheLogRebuildsTheSameState) {
  const auto id1 = Capture(a_, "k1", Req("ch_1"));
  Capture(b_, "k1", Req("ch_b"), 3'000'000);
  ASSERT_EQ(store_.BeginCapture(a_, "d1", Req("ch_d", 1, "pm_tok_declined")).outcome, BeginOutcome::kProceed);
  store_.CompleteCapture(a_, "d1", Req("ch_d", 1, "pm_tok_declined"), std::string("card_declined"), 0);
  store_.Void(a_, "v1", id1);
  store_.Void(a_, "v2", id1);  // recorded (the key is remembered) but no second ledger entry

  MemorySink sink2;
  CaptureStore restored(sink2, clock_, 1);
  std::string_view rest = sink_.data;
  while (!rest.empty()) {
    const auto nl = rest.find('\n');
    auto record = DecodeRecord(rest.substr(0, nl));
    ASSERT_TRUE(record.has_value()) << record.error();
    restored.Apply(*record);
    rest.remove_prefix(nl + 1);
  }
  const auto before = store_.Ledger();
  const auto after = restored.Ledger();
  ASSERT_EQ(after.size(), before.size());
  for (std::size_t i = 0; i < before.size(); ++i) {
    EXPECT_EQ(after[i].type, before[i].type);
    EXPECT_EQ(after[i].capture.id, before[i].capture.id);
    EXPECT_EQ(after[i].capture.request, before[i].capture.request);
    EXPECT_EQ(after[i].idempotency_key, before[i].idempotency_key);
    EXPECT_EQ(after[i].at_us, before[i].at_us);
  }
  const auto ra = restored.InternMerchant("m_a");
  const auto rb = restored.InternMerchant("m_b");
  EXPECT_EQ(restored.BeginCapture(ra, "k1", Req("ch_1")).capture->id, id1);
  EXPECT_EQ(restored.BeginCapture(ra, "d1", Req("ch_d", 1, "pm_tok_declined")).decline_code, "card_declined");
  EXPECT_EQ(restored.Void(ra, "v2", id1).outcome, VoidOutcome::kAlreadyVoided);
  EXPECT_FALSE(restored.LookupByKey(rb, "k1").has_value());  // visibility survives the restart
  clock_.now += 3'000'000;
  EXPECT_TRUE(restored.LookupByKey(rb, "k1").has_value());
  EXPECT_TRUE(sink2.data.empty());  // replay writes nothing
}

TEST_F(CaptureStoreTest, ApplyRefusesContradictoryRecords) {
  LogRecord orphan_void{RecordType::kVoid, "m_a", "v", "cap_nope", {}, {}, 1, 0};
  EXPECT_THROW(store_.Apply(orphan_void), LogError);
  LogRecord capture{RecordType::kCapture, "m_a", "k", "cap_1", Req("r"), {}, 1, 1};
  store_.Apply(capture);
  EXPECT_THROW(store_.Apply(capture), LogError);
}

TEST_F(CaptureStoreTest, ResetForgetsEverythingAndEmptiesTheLog) {
  const auto id = Capture(a_, "k1", Req("ch_1"));
  store_.Void(a_, "v1", id);
  ASSERT_FALSE(sink_.data.empty());
  ASSERT_TRUE(store_.Reset());
  EXPECT_TRUE(sink_.data.empty());
  EXPECT_TRUE(store_.Ledger().empty());
  EXPECT_FALSE(store_.LookupByKey(a_, "k1").has_value());
  EXPECT_EQ(store_.BeginCapture(a_, "k1", Req("different")).outcome, BeginOutcome::kProceed);
}

TEST_F(CaptureStoreTest, CaptureIdsAreUnique) {
  std::set<std::string> ids;
  for (int i = 0; i < 2000; ++i) ids.insert(Capture(a_, "k" + std::to_string(i), Req("r")));
  EXPECT_EQ(ids.size(), 2000u);
}

}  // namespace
}  // namespace charge_outbox::acquirer_sim
