// Token buckets: the per-merchant request limit, the per-client failed-authentication limit and the
// per-client pace of anonymous refusals. A bucket holds up to `burst` tokens and refills at `rate` per
// second; a request (or a failure, or a refusal) spends one.
// Limits are per instance: N replicas let a merchant through N times as fast.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "lru_map.hpp"

namespace charge_outbox::charge_api {

using TimePoint = std::chrono::steady_clock::time_point;
// The time source, a parameter so that tests can move time by hand.
using Clock = std::function<TimePoint()>;
inline TimePoint SteadyNow() { return std::chrono::steady_clock::now(); }

struct TokenBucketRule {
  double rate = 0;   // tokens per second; 0 turns the limit off
  double burst = 1;  // the bucket's size: how many at once after a quiet spell
};

class TokenBucket {
 public:
  TokenBucket(const TokenBucketRule& rule, TimePoint now) : tokens_(rule.burst), updated_(now) {}

  // Spends a token if there is one.
  bool TryTake(const TokenBucketRule& rule, TimePoint now);
  // Spends a token even when there is none, owing it, and returns how long the spender must wait for the
  // token it took: spenders past the burst are queued at the rate (GCRA, nginx's limit_req with a delay).
  // A wait past `max_wait` is not queued: it returns max_wait and owes nothing, so the debt, and the pace
  // that anyone sharing the key inherits, stays bounded.
  std::chrono::nanoseconds Reserve(const TokenBucketRule& rule, TimePoint now, std::chrono::nanoseconds max_wait);
  // Gives a token back (never above the burst).
  void Refund(const TokenBucketRule& rule, TimePoint now);
  // Whole seconds until a token is back, at least 1: a Retry-After.
  std::chrono::seconds RetryAfter(const TokenBucketRule& rule) const;

 private:
  void Refill(const TokenBucketRule& rule, TimePoint now);
  double tokens_;
  TimePoint updated_;
};

// A bucket per key (a merchant, a client address) for at most `max_keys` keys; the least recently seen
// key's bucket is forgotten first (it starts full again if it comes back). Thread-safe.
class KeyedLimiter {
 public:
  KeyedLimiter(TokenBucketRule rule, std::size_t max_keys, Clock clock = SteadyNow);

  bool enabled() const { return rule_.rate > 0; }
  // Spends one of the key's tokens; nullopt when it had one, else the Retry-After.
  std::optional<std::chrono::seconds> TryTake(const std::string& key);
  // TokenBucket::Reserve for the key's bucket; zero when the limit is off.
  std::chrono::nanoseconds Reserve(const std::string& key, std::chrono::nanoseconds max_wait);
  // Gives back a token taken in advance (a key that turned out valid, a lookup the database failed).
  // A key with no bucket (forgotten meanwhile) gets none.
  void Refund(const std::string& key);
  std::size_t size() const;

 private:
  // The key's bucket, a full one for a key not seen (or forgotten); under mutex_.
  TokenBucket& BucketOf(const std::string& key, TimePoint now);

  const TokenBucketRule rule_;
  const Clock clock_;
  mutable std::mutex mutex_;
  LruMap<std::string, TokenBucket> buckets_;
};

}  // namespace charge_outbox::charge_api
