// The memories a client can fill are bounded (LruMap), and the limits keep time by a clock the test moves.
#include <gtest/gtest.h>

#include <string>

#include "lru_map.hpp"
#include "token_bucket.hpp"

namespace charge_outbox::charge_api {
namespace {

using namespace std::chrono_literals;

struct FakeClock {
  TimePoint now{};
  Clock clock() {
    return [this] { return now; };
  }
};

TEST(LruMap, ForgetsTheLeastRecentlyUsedWhenFull) {
  LruMap<std::string, int> map(2);
  map.Put("a", 1);
  map.Put("b", 2);
  ASSERT_NE(map.Find("a"), nullptr);  // "a" is now the most recent
  map.Put("c", 3);
  EXPECT_EQ(map.size(), 2u);
  EXPECT_EQ(map.Find("b"), nullptr);
  EXPECT_EQ(*map.Find("a"), 1);
  EXPECT_EQ(*map.Find("c"), 3);
}

TEST(LruMap, ReplacingKeepsOneEntryAndEraseForgets) {
  LruMap<std::string, int> map(3);
  map.Put("a", 1);
  map.Put("a", 2);
  EXPECT_EQ(map.size(), 1u);
  EXPECT_EQ(*map.Find("a"), 2);
  map.Erase("a");
  map.Erase("never there");
  EXPECT_EQ(map.Find("a"), nullptr);
  EXPECT_EQ(map.size(), 0u);
}

TEST(LruMap, AFloodNeverGrowsItPastItsCapacity) {
  LruMap<std::string, int> map(100);
  for (int i = 0; i < 100'000; ++i) map.Put(std::to_string(i), i);
  EXPECT_EQ(map.size(), 100u);
  EXPECT_NE(map.Find("99999"), nullptr);
  EXPECT_EQ(map.Find("0"), nullptr);
}

TEST(TokenBucket, AllowsABurstThenTheRateAndSaysWhenToRetry) {
  const TokenBucketRule rule{.rate = 2, .burst = 3};
  TimePoint now{};
  TokenBucket bucket(rule, now);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(bucket.TryTake(rule, now)) << i;
  EXPECT_FALSE(bucket.TryTake(rule, now));
  EXPECT_EQ(bucket.RetryAfter(rule), 1s);  // half a second, rounded up to a whole Retry-After
  now += 500ms;
  EXPECT_TRUE(bucket.TryTake(rule, now));
  EXPECT_FALSE(bucket.TryTake(rule, now));
  now += 1h;  // never more than the burst, however long the quiet
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(bucket.TryTake(rule, now)) << i;
  EXPECT_FALSE(bucket.TryTake(rule, now));
}

TEST(TokenBucket, ASlowRateAsksForALongerWait) {
  const TokenBucketRule rule{.rate = 0.1, .burst = 1};
  TokenBucket bucket(rule, TimePoint{});
  EXPECT_TRUE(bucket.TryTake(rule, TimePoint{}));
  EXPECT_EQ(bucket.RetryAfter(rule), 10s);
}

// Reserve queues past the burst: each spender waits one interval longer than the one before, until the
// queue would pass max_wait; those wait max_wait and leave the queue as it was.
TEST(TokenBucket, ReserveQueuesPastTheBurstAndNeverOwesMoreThanMaxWait) {
  const TokenBucketRule rule{.rate = 10, .burst = 2};
  TimePoint now{};
  TokenBucket bucket(rule, now);
  EXPECT_EQ(bucket.Reserve(rule, now, 1s), 0ns);
  EXPECT_EQ(bucket.Reserve(rule, now, 1s), 0ns);
  EXPECT_EQ(bucket.Reserve(rule, now, 1s), 100ms);
  EXPECT_EQ(bucket.Reserve(rule, now, 1s), 200ms);
  for (int i = 3; i <= 10; ++i) EXPECT_EQ(bucket.Reserve(rule, now, 1s), i * 100ms) << i;
  EXPECT_EQ(bucket.Reserve(rule, now, 1s), 1s) << "past max_wait: held max_wait";
  EXPECT_EQ(bucket.Reserve(rule, now, 1s), 1s);
  now += 1s;  // ten intervals later the queue has drained, and nothing was owed for the capped ones
  EXPECT_EQ(bucket.Reserve(rule, now, 1s), 100ms);
  EXPECT_FALSE(bucket.TryTake(rule, now));
  now += 1h;
  EXPECT_TRUE(bucket.TryTake(rule, now)) << "a quiet spell pays the debt and refills the burst";
  EXPECT_TRUE(bucket.TryTake(rule, now));
  EXPECT_FALSE(bucket.TryTake(rule, now));
}

TEST(KeyedLimiter, ReserveIsPerKeyAndZeroWhenOff) {
  FakeClock time;
  KeyedLimiter limiter({.rate = 4, .burst = 1}, 10, time.clock());
  EXPECT_EQ(limiter.Reserve("10.0.0.1", 5s), 0ns);
  EXPECT_EQ(limiter.Reserve("10.0.0.1", 5s), 250ms);
  EXPECT_EQ(limiter.Reserve("10.0.0.2", 5s), 0ns);
  KeyedLimiter off({.rate = 0, .burst = 1}, 10);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(off.Reserve("10.0.0.1", 5s), 0ns);
}

TEST(KeyedLimiter, KeysHaveBucketsOfTheirOwn) {
  FakeClock time;
  KeyedLimiter limiter({.rate = 1, .burst = 2}, 10, time.clock());
  EXPECT_FALSE(limiter.TryTake("m1"));
  EXPECT_FALSE(limiter.TryTake("m1"));
  EXPECT_EQ(limiter.TryTake("m1"), 1s);
  EXPECT_FALSE(limiter.TryTake("m2"));
  time.now += 1s;
  EXPECT_FALSE(limiter.TryTake("m1"));
  EXPECT_TRUE(limiter.TryTake("m1"));
}

TEST(KeyedLimiter, ARefundGivesATokenBackButNeverMoreThanTheBurst) {
  FakeClock time;
  KeyedLimiter limiter({.rate = 0.5, .burst = 2}, 10, time.clock());
  limiter.Refund("never seen");  // no bucket, nothing to refund: no memory either
  EXPECT_EQ(limiter.size(), 0u);
  EXPECT_FALSE(limiter.TryTake("10.0.0.1"));
  EXPECT_FALSE(limiter.TryTake("10.0.0.1"));
  EXPECT_EQ(limiter.TryTake("10.0.0.1"), 2s);
  limiter.Refund("10.0.0.1");
  EXPECT_FALSE(limiter.TryTake("10.0.0.1"));
  EXPECT_TRUE(limiter.TryTake("10.0.0.1"));
  for (int i = 0; i < 10; ++i) limiter.Refund("10.0.0.1");
  EXPECT_FALSE(limiter.TryTake("10.0.0.1"));
  EXPECT_FALSE(limiter.TryTake("10.0.0.1"));
  EXPECT_TRUE(limiter.TryTake("10.0.0.1")) << "refunds filled the bucket past its burst";
}

TEST(KeyedLimiter, RateZeroIsOff) {
  KeyedLimiter limiter({.rate = 0, .burst = 1}, 10);
  for (int i = 0; i < 1000; ++i) {
    EXPECT_FALSE(limiter.TryTake("m"));
    limiter.Refund("m");
  }
  EXPECT_EQ(limiter.size(), 0u);
}

TEST(KeyedLimiter, TracksAtMostMaxKeys) {
  KeyedLimiter limiter({.rate = 1, .burst = 1}, 50);
  for (int i = 0; i < 10'000; ++i) limiter.TryTake("client-" + std::to_string(i));
  EXPECT_EQ(limiter.size(), 50u);
}

}  // namespace
}  // namespace charge_outbox::charge_api
