// The window comparison: each kind of discrepancy found, and agreement found as agreement.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/json/serialize.hpp>

#include "window_compare.hpp"

namespace charge_outbox::reconciler {
namespace {

using ::testing::ElementsAre;
using charges::ChargeStatus;

constexpr const char* kMerchant = "00000000-0000-4000-8000-00000000000a";

charges::Charge Charge(int n, ChargeStatus status, std::optional<std::string> capture_id = std::nullopt) {
  charges::Charge c;
  char uuid[40];
  std::snprintf(uuid, sizeof uuid, "00000000-0000-4000-8000-%012d", n);
  c.id = uuid;
  c.merchant_id = kMerchant;
  c.idempotency_key = "key-" + std::to_string(n);
  c.amount = 1000 + n;
  c.currency = "BRL";
  c.status = status;
  c.acquirer_capture_id = std::move(capture_id);
  return c;
}

acquirer::Capture CaptureOf(const charges::Charge& c, std::string id,
                            acquirer::CaptureStatus status = acquirer::CaptureStatus::kCaptured) {
  acquirer::Capture capture;
  capture.id = std::move(id);
  capture.status = status;
  capture.amount = c.amount;
  capture.currency = c.currency;
  capture.reference = c.public_id();
  capture.created_at = "2026-11-30T01:00:00.000000Z";
  capture.idempotency_key = charges::AcquirerIdempotencyKey(c);
  return capture;
}

std::vector<std::string> Kinds(const WindowComparison& w) {
  std::vector<std::string> kinds;
  for (const auto& d : w.discrepancies) {
    std::string k(ToString(d.kind));
    for (const auto& f : d.fields) k += ":" + f;
    kinds.push_back(k);
  }
  return kinds;
}

TEST(ReconcilerWindowCompare, AgreeingSidesHaveNoDiscrepancy) {
  const auto a = Charge(1, ChargeStatus::kCaptured, "cap_1");
  const auto b = Charge(2, ChargeStatus::kCaptured);  // captured by the reconciler before ids were recorded
  const auto c = Charge(3, ChargeStatus::kCanceled, "cap_3");
  const auto p = Charge(4, ChargeStatus::kPending);
  const auto w = CompareWindow(
      {CaptureOf(a, "cap_1"), CaptureOf(b, "cap_2"), CaptureOf(c, "cap_3", acquirer::CaptureStatus::kVoided),
       CaptureOf(p, "cap_4")},
      {a, b, c, p}, {a, b});
  EXPECT_TRUE(w.discrepancies.empty()) << Kinds(w).size();
  EXPECT_EQ(w.matched, 3);
  EXPECT_EQ(w.pending_with_capture, 1);
  EXPECT_TRUE(w.unlisted.empty());
}

TEST(ReconcilerWindowCompare, EachKindOfDiscrepancyIsFound) {
  const auto amount = Charge(1, ChargeStatus::kCaptured, "cap_1");
  const auto currency = Charge(2, ChargeStatus::kCaptured);
  const auto failed = Charge(3, ChargeStatus::kFailed);
  const auto other_id = Charge(4, ChargeStatus::kCaptured, "cap_x");
  const auto duplicated = Charge(5, ChargeStatus::kCaptured, "cap_5b");
  const auto unlisted = Charge(6, ChargeStatus::kCaptured, "cap_6");
  const auto stranger = Charge(7, ChargeStatus::kCaptured);  // no local record of it
  const auto voided_but_captured = Charge(8, ChargeStatus::kCaptured, "cap_8");

  auto amount_capture = CaptureOf(amount, "cap_1");
  amount_capture.amount += 1;
  auto currency_capture = CaptureOf(currency, "cap_2");
  currency_capture.currency = "USD";
  auto other_key = CaptureOf(Charge(9, ChargeStatus::kCaptured), "cap_9");
  other_key.reference = Charge(10, ChargeStatus::kCaptured).public_id();
  const auto w = CompareWindow(
      {amount_capture, currency_capture, CaptureOf(failed, "cap_3"), CaptureOf(other_id, "cap_4"),
       CaptureOf(duplicated, "cap_5a"), CaptureOf(duplicated, "cap_5b"), CaptureOf(stranger, "cap_7"),
       CaptureOf(voided_but_captured, "cap_8", acquirer::CaptureStatus::kVoided)},
      {amount, currency, failed, other_id, duplicated, voided_but_captured}, {amount, unlisted});
  // Listing order, but for a capture that waits for the one its charge recorded: cap_4 (its charge recorded
  // cap_x, never listed) is judged at the listing's end, cap_5a when cap_5b comes.
  EXPECT_THAT(Kinds(w), ElementsAre("mismatch:amount", "mismatch:currency", "mismatch:status", "duplicate_capture",
                                    "capture_without_local_record", "mismatch:status", "mismatch:capture_id"));
  EXPECT_EQ(w.discrepancies[3].capture->id, "cap_5a");  // the one our charge did not record
  EXPECT_EQ(w.matched, 1);                              // the recorded capture of the duplicated charge
  ASSERT_EQ(w.unlisted.size(), 1u);
  EXPECT_EQ(w.unlisted[0].id, unlisted.id);
}

TEST(ReconcilerWindowCompare, ACaptureUnderAnotherKeyForOurChargeIsAMismatch) {
  const auto ours = Charge(1, ChargeStatus::kCaptured, "cap_1");
  auto capture = CaptureOf(ours, "cap_1");
  capture.idempotency_key = "someone-else:key";
  const auto w = CompareWindow({capture}, {ours}, {});
  EXPECT_THAT(Kinds(w), ElementsAre("mismatch:idempotency_key"));
}

TEST(ReconcilerWindowCompare, PendingAndInReviewChargesAreNotStatusContradictions) {
  const auto pending = Charge(1, ChargeStatus::kPending);
  const auto review = Charge(2, ChargeStatus::kNeedsReview);
  auto pending_capture = CaptureOf(pending, "cap_1");
  pending_capture.amount = 1;  // but an amount difference is one
  const auto w = CompareWindow({pending_capture, CaptureOf(review, "cap_2")}, {pending, review}, {});
  EXPECT_THAT(Kinds(w), ElementsAre("mismatch:amount"));
  EXPECT_EQ(w.matched, 1);
}

// Page by page, the comparer judges as the whole window would: a second capture of a charge on a later page
// is a duplicate; the capture a charge recorded is the genuine one even when a stray one came pages before
// it; a charge whose recorded capture is never listed is judged at the end. What it keeps between pages is
// the charges' uuids, not the captures.
TEST(ReconcilerWindowCompare, PagesAreJudgedAsTheWholeWindowWould) {
  const auto first = Charge(1, ChargeStatus::kCaptured);            // no recorded id: the first listed counts
  const auto recorded = Charge(2, ChargeStatus::kCaptured, "cap_2b");  // its capture comes on page 3
  const auto never = Charge(3, ChargeStatus::kCaptured, "cap_3x");     // its recorded capture is never listed
  const auto later = Charge(4, ChargeStatus::kCaptured, "cap_4");      // in our window, listed on page 3 only
  const std::vector<acquirer::Capture> page1{CaptureOf(first, "cap_1a"), CaptureOf(recorded, "cap_2a")};
  const std::vector<acquirer::Capture> page2{CaptureOf(first, "cap_1b"), CaptureOf(never, "cap_3")};
  const std::vector<acquirer::Capture> page3{CaptureOf(recorded, "cap_2b"), CaptureOf(later, "cap_4")};

  WindowComparer comparer;
  std::vector<std::string> found;
  const auto take = [&](std::vector<Discrepancy> ds) {
    for (const auto& d : ds) found.push_back(std::string(ToString(d.kind)) + " " + d.capture->id);
  };
  take(comparer.ComparePage(page1, {first, recorded}));
  EXPECT_TRUE(found.empty()) << "cap_2a waits for the capture its charge recorded";
  EXPECT_FALSE(comparer.Listed(later.id));
  take(comparer.ComparePage(page2, {first, never}));
  EXPECT_THAT(found, ElementsAre("duplicate_capture cap_1b"));
  take(comparer.ComparePage(page3, {recorded, later}));
  EXPECT_THAT(found, ElementsAre("duplicate_capture cap_1b", "duplicate_capture cap_2a"));
  take(comparer.Finish());
  ASSERT_EQ(found.size(), 3u);
  EXPECT_EQ(found[2], "mismatch cap_3");
  EXPECT_EQ(comparer.matched(), 3);  // cap_1a, cap_2b, cap_4
  EXPECT_EQ(comparer.referenced(), 4u);
  EXPECT_TRUE(comparer.Listed(later.id));
  EXPECT_FALSE(comparer.Listed(Charge(5, ChargeStatus::kCaptured).id));

  // The same captures as one page: the same verdicts.
  std::vector<acquirer::Capture> all(page1);
  all.insert(all.end(), page2.begin(), page2.end());
  all.insert(all.end(), page3.begin(), page3.end());
  const auto whole = CompareWindow(all, {first, recorded, never, later}, {later});
  std::vector<std::string> at_once;
  for (const auto& d : whole.discrepancies) at_once.push_back(std::string(ToString(d.kind)) + " " + d.capture->id);
  EXPECT_THAT(at_once, ::testing::UnorderedElementsAreArray(found));
  EXPECT_EQ(whole.matched, 3);
  EXPECT_TRUE(whole.unlisted.empty());
}

TEST(ReconcilerWindowCompare, AUuidKeyIsTheUuidsSixteenBytes) {
  const auto key = UuidKeyOf("0123abcd-4567-4def-89AB-cdef01234567");
  ASSERT_TRUE(key);
  EXPECT_EQ((*key)[0], 0x01);
  EXPECT_EQ((*key)[15], 0x67);
  EXPECT_EQ(UuidKeyOf("0123abcd-4567-4def-89ab-cdef01234567"), key);
  EXPECT_FALSE(UuidKeyOf("0123abcd-4567-4def-89ab-cdef0123456"));
  EXPECT_FALSE(UuidKeyOf("0123abcd-4567-4def-89ab-cdef012345678"));
  EXPECT_FALSE(UuidKeyOf("0123abcd-4567-4def-89ab-cdef0123456g"));
  EXPECT_FALSE(UuidKeyOf(""));
}

TEST(ReconcilerWindowCompare, DiscrepancyJsonCarriesBothSides) {
  const auto ours = Charge(1, ChargeStatus::kCaptured, "cap_1");
  auto capture = CaptureOf(ours, "cap_1");
  capture.amount = 5;
  Discrepancy d{DiscrepancyKind::kMismatch, capture, ours, {"amount"}};
  const auto text = boost::json::serialize(DiscrepancyJson(d));
  EXPECT_EQ(text,
            R"({"kind":"mismatch","charge_id":")" + ours.public_id() +
                R"(","fields":["amount"],"local":{"id":")" + ours.public_id() +
                R"(","merchant_id":"00000000-0000-4000-8000-00000000000a","status":"captured","amount":1001,)"
                R"("currency":"BRL","acquirer_idempotency_key":"00000000-0000-4000-8000-00000000000a:key-1",)"
                R"("acquirer_capture_id":"cap_1","created_at":"1970-01-01T00:00:00.000Z",)"
                R"("updated_at":"1970-01-01T00:00:00.000Z"},"acquirer":{"id":"cap_1","status":"captured",)"
                R"("amount":5,"currency":"BRL","reference":")" + ours.public_id() +
                R"(","created_at":"2026-11-30T01:00:00.000000Z",)"
                R"("idempotency_key":"00000000-0000-4000-8000-00000000000a:key-1"}})");
  Discrepancy stray{DiscrepancyKind::kCaptureWithoutLocalRecord, capture, std::nullopt, {}};
  EXPECT_EQ(boost::json::serialize(DiscrepancyJson(stray)).substr(0, 64),
            R"({"kind":"capture_without_local_record","reference":"ch_000000000)");
}

}  // namespace
}  // namespace charge_outbox::reconciler
