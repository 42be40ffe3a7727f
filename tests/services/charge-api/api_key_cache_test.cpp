// ApiKeyCache: valid keys and unknown keys are remembered apart, each in a bounded LRU, so a flood of
// random keys costs the database one lookup per key at most and never pushes a merchant's key out.
#include <gtest/gtest.h>

#include <string>

#include "api_key_cache.hpp"
#include "await.hpp"
#include "charge_outbox/util/sha256.hpp"
#include "fake_charge_stores.hpp"

namespace charge_outbox::charge_api {
namespace {

using namespace std::chrono_literals;
using testing::Await;

constexpr const char* kKey = "sk_test_valid_merchant_key";
constexpr const char* kMerchant = "00000000-0000-4000-8000-000000000001";

class ApiKeyCacheTest : public ::testing::Test {
 protected:
  ApiKeyCacheTest() { table_.merchants_by_key_hash_[util::Sha256Hex(kKey)] = kMerchant; }

  int Lookups() const { return table_.Calls("Authenticate"); }

  TimePoint now_{};
  testing::FakeChargeTable table_{[] { return charges::Timestamp{}; }};
  testing::FakeAuthenticator store_{table_};
  std::shared_ptr<metrics::Registry> registry_ = metrics::NewRegistry();
  ChargeApiProbe probe_{*registry_};
};

TEST_F(ApiKeyCacheTest, AValidKeyCostsOneLookupPerTtl) {
  ApiKeyCache cache(store_, probe_, {.ttl = 30s, .valid_entries = 10, .unknown_entries = 10}, [this] { return now_; });
  for (int i = 0; i < 5; ++i) {
    const auto found = Await(cache.Authenticate(kKey));
    ASSERT_TRUE(found && *found);
    EXPECT_EQ((*found)->id, kMerchant);
  }
  EXPECT_EQ(Lookups(), 1);
  now_ += 31s;
  EXPECT_FALSE(cache.Recall(kKey)) << "past its TTL a key is asked again (a revoked key stops working)";
  ASSERT_TRUE(Await(cache.Authenticate(kKey)).value());
  EXPECT_EQ(Lookups(), 2);
}

// Asking again about a key that was valid is no sign of guessing; asking about one nobody has seen valid is.
TEST_F(ApiKeyCacheTest, OnlyAKeyLastSeenValidIsFreeToLookUpAgain) {
  ApiKeyCache cache(store_, probe_, {.ttl = 30s, .valid_entries = 10, .unknown_entries = 10}, [this] { return now_; });
  EXPECT_FALSE(cache.LookupIsFree(kKey)) << "never asked";
  ASSERT_TRUE(Await(cache.Authenticate(kKey)).value());
  now_ += 31s;
  EXPECT_FALSE(cache.Recall(kKey));
  EXPECT_TRUE(cache.LookupIsFree(kKey)) << "valid when last asked; only its answer expired";
  ASSERT_TRUE(Await(cache.Authenticate("sk_garbage")));
  EXPECT_FALSE(cache.LookupIsFree("sk_garbage"));
  now_ += 31s;
  EXPECT_FALSE(cache.LookupIsFree("sk_garbage")) << "an expired unknown answer is still no reason to ask for free";
  // Revoked: the lookup answers unknown, and the key is no longer free to ask about.
  table_.merchants_by_key_hash_.clear();
  ASSERT_TRUE(Await(cache.Authenticate(kKey)));
  EXPECT_FALSE(cache.LookupIsFree(kKey));
}

TEST_F(ApiKeyCacheTest, AnUnknownKeyIsRememberedAsUnknown) {
  ApiKeyCache cache(store_, probe_, {.ttl = 30s, .valid_entries = 10, .unknown_entries = 10}, [this] { return now_; });
  EXPECT_FALSE(cache.Recall("sk_garbage"));
  const auto found = Await(cache.Authenticate("sk_garbage"));
  ASSERT_TRUE(found);
  EXPECT_FALSE(*found);
  const auto recalled = cache.Recall("sk_garbage");
  ASSERT_TRUE(recalled);
  EXPECT_FALSE(*recalled);
  EXPECT_FALSE(Await(cache.Authenticate("sk_garbage")).value());
  EXPECT_EQ(Lookups(), 1);
}

// The old cache cleared everything, valid keys included, when 10,000 entries were reached: a flood of
// random keys made every merchant's next request a database lookup.
TEST_F(ApiKeyCacheTest, TwentyThousandUnknownKeysNeverEvictAValidOne) {
  ApiKeyCache cache(store_, probe_, {.ttl = 1h, .valid_entries = 10'000, .unknown_entries = 10'000},
                    [this] { return now_; });
  ASSERT_TRUE(Await(cache.Authenticate(kKey)).value());
  for (int i = 0; i < 20'000; ++i) ASSERT_TRUE(Await(cache.Authenticate("sk_flood_" + std::to_string(i))));
  const auto lookups = Lookups();
  EXPECT_EQ(lookups, 20'001);
  const auto recalled = cache.Recall(kKey);
  ASSERT_TRUE(recalled) << "the valid key was forgotten by the flood";
  ASSERT_TRUE(*recalled);
  EXPECT_EQ((*recalled)->id, kMerchant);
  ASSERT_TRUE(Await(cache.Authenticate(kKey)).value());
  EXPECT_EQ(Lookups(), lookups);
  // The unknown keys' memory stayed within its bound.
  EXPECT_FALSE(cache.Recall("sk_flood_0"));
  EXPECT_TRUE(cache.Recall("sk_flood_19999"));
}

TEST_F(ApiKeyCacheTest, ADatabaseErrorIsNotRemembered) {
  ApiKeyCache cache(store_, probe_, {.ttl = 30s, .valid_entries = 10, .unknown_entries = 10}, [this] { return now_; });
  table_.FailNext("Authenticate", db::DbErrc::kUnavailable);
  const auto failed = Await(cache.Authenticate(kKey));
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().code, db::DbErrc::kUnavailable);
  EXPECT_FALSE(cache.Recall(kKey));
  EXPECT_TRUE(Await(cache.Authenticate(kKey)).value());
}

}  // namespace
}  // namespace charge_outbox::charge_api
