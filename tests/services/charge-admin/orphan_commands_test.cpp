// Which capture without a charge of ours may be adopted, and as which charge: only one charge-api made
// for the merchant the person names (its reference our charge id, its key that merchant's), written back
// under the same id and the client's own key. And the key a void of it is asked under.
#include "orphan_commands.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace charge_outbox::charge_admin {
namespace {

using ::testing::HasSubstr;

constexpr const char* kMerchant = "00000000-0000-4000-8000-00000000000a";
constexpr const char* kReference = "ch_0123456789abcdef0123456789abcdef";

acquirer::Capture Orphan(std::string reference, std::optional<std::string> key) {
  return acquirer::Capture{"cap_9", acquirer::CaptureStatus::kCaptured, 4200, "BRL", std::move(reference),
                           "2026-12-05T10:00:00.000000Z", std::move(key)};
}

TEST(AdoptionTargetOf, IsTheChargeTheReferenceNamesUnderTheClientsKey) {
  const auto target = AdoptionTargetOf(Orphan(kReference, std::string(kMerchant) + ":order-7:try-1"), kMerchant);
  EXPECT_EQ(target.refusal, "");
  EXPECT_EQ(target.charge_id, "01234567-89ab-cdef-0123-456789abcdef");
  EXPECT_EQ(target.idempotency_key, "order-7:try-1") << "only the merchant's scope is taken off";
}

TEST(AdoptionTargetOf, RefusesACaptureChargeApiDidNotMakeForThatMerchant) {
  EXPECT_THAT(AdoptionTargetOf(Orphan("PED-7", std::string(kMerchant) + ":k"), kMerchant).refusal,
              HasSubstr("not a charge id of ours"));
  EXPECT_THAT(AdoptionTargetOf(Orphan(kReference, std::nullopt), kMerchant).refusal, HasSubstr("no key"));
  EXPECT_THAT(AdoptionTargetOf(Orphan(kReference, "00000000-0000-4000-8000-00000000000b:k"), kMerchant).refusal,
              HasSubstr("is not merchant"));
  EXPECT_THAT(AdoptionTargetOf(Orphan(kReference, "terminal-42"), kMerchant).refusal, HasSubstr("is not merchant"));
  EXPECT_THAT(AdoptionTargetOf(Orphan(kReference, std::string(kMerchant) + ":"), kMerchant).refusal,
              HasSubstr("is not merchant"))
      << "an empty client key is no key";
}

TEST(VoidKeyOf, IsTheCapturesOwnKeySoThatAVoidAskedAgainIsTheSameVoid) {
  EXPECT_EQ(VoidKeyOf(Orphan(kReference, "m:k")), "m:k");
  EXPECT_EQ(VoidKeyOf(Orphan(kReference, std::nullopt)), "orphan-void:cap_9");
}

}  // namespace
}  // namespace charge_outbox::charge_admin
