#include "charge_outbox/charges/charge.hpp"

#include <gtest/gtest.h>

namespace charge_outbox::charges {
namespace {

TEST(PublicChargeId, RoundTripsThroughTheUuid) {
  const std::string uuid = "0f8fad5b-d9cb-469f-a165-70867728950e";
  const auto id = PublicChargeId(uuid);
  EXPECT_EQ(id, "ch_0f8fad5bd9cb469fa16570867728950e");
  EXPECT_EQ(UuidFromPublicId(id), uuid);
}

TEST(PublicChargeId, RejectsAnythingElse) {
  for (const char* bad : {"", "ch_", "0f8fad5bd9cb469fa16570867728950e", "ch_0f8fad5bd9cb469fa16570867728950",
                          "ch_0f8fad5bd9cb469fa16570867728950e0", "ch_0F8FAD5BD9CB469FA16570867728950E",
                          "ch_0f8fad5bd9cb469fa16570867728950g", "cx_0f8fad5bd9cb469fa16570867728950e"}) {
    EXPECT_FALSE(UuidFromPublicId(bad).has_value()) << bad;
  }
}

TEST(ChargeStatus, SpellsAndParsesEveryState) {
  for (const auto s : {ChargeStatus::kPending, ChargeStatus::kCaptured, ChargeStatus::kFailed, ChargeStatus::kCanceled,
                       ChargeStatus::kNeedsReview}) {
    EXPECT_EQ(ParseChargeStatus(ToString(s)), s);
  }
  EXPECT_EQ(ToString(ChargeStatus::kNeedsReview), "needs_review");
  EXPECT_FALSE(ParseChargeStatus("PENDING").has_value());
  EXPECT_FALSE(IsTerminal(ChargeStatus::kPending));
  EXPECT_TRUE(IsTerminal(ChargeStatus::kCanceled));
}

TEST(FormatTimestamp, IsRfc3339UtcWithMilliseconds) {
  const Timestamp t{std::chrono::milliseconds{1'764'471'180'367}};
  EXPECT_EQ(FormatTimestamp(t), "2025-11-30T02:53:00.367Z");
}

}  // namespace
}  // namespace charge_outbox::charges
