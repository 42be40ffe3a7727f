#include "token_bucket.hpp"

#include <algorithm>
#include <cmath>

namespace charge_outbox::charge_api {

void TokenBucket::Refill(const TokenBucketRule& rule, TimePoint now) {
  if (now <= updated_) return;
  const double elapsed = std::chrono::duration<double>(now - updated_).count();
  tokens_ = std::min(rule.burst, tokens_ + elapsed * rule.rate);
  updated_ = now;
}

bool TokenBucket::TryTake(const TokenBucketRule& rule, TimePoint now) {
  Refill(rule, now);
  if (tokens_ < 1) return false;
  tokens_ -= 1;
  return true;
}

std::chrono::nanoseconds TokenBucket::Reserve(const TokenBucketRule& rule, TimePoint now,
                                              std::chrono::nanoseconds max_wait) {
  Refill(rule, now);
  if (tokens_ >= 1) {
    tokens_ -= 1;
    return std::chrono::nanoseconds::zero();
  }
  const auto wait =
      std::chrono::round<std::chrono::nanoseconds>(std::chrono::duration<double>((1 - tokens_) / rule.rate));
  if (wait > max_wait) return max_wait;
  tokens_ -= 1;
  return wait;
}

void TokenBucket::Refund(const TokenBucketRule& rule, TimePoint now) {
  Refill(rule, now);
  tokens_ = std::min(rule.burst, tokens_ + 1);
}

std::chrono::seconds TokenBucket::RetryAfter(const TokenBucketRule& rule) const {
  if (rule.rate <= 0) return std::chrono::seconds{1};
  const double wait = std::ceil((1 - tokens_) / rule.rate);
  return std::chrono::seconds{std::max<long long>(1, static_cast<long long>(wait))};
}

KeyedLimiter::KeyedLimiter(TokenBucketRule rule, std::size_t max_keys, Clock clock)
    : rule_(rule), clock_(std::move(clock)), buckets_(max_keys) {}

TokenBucket& KeyedLimiter::BucketOf(const std::string& key, TimePoint now) {
  if (auto* bucket = buckets_.Find(key)) return *bucket;
  return buckets_.Put(key, TokenBucket(rule_, now));
}

std::optional<std::chrono::seconds> KeyedLimiter::TryTake(const std::string& key) {
  if (!enabled()) return std::nullopt;
  const auto now = clock_();
  std::lock_guard lock(mutex_);
  auto& bucket = BucketOf(key, now);
  if (bucket.TryTake(rule_, now)) return std::nullopt;
  return bucket.RetryAfter(rule_);
}

std::chrono::nanoseconds KeyedLimiter::Reserve(const std::string& key, std::chrono::nanoseconds max_wait) {
  if (!enabled()) return std::chrono::nanoseconds::zero();
  const auto now = clock_();
  std::lock_guard lock(mutex_);
  return BucketOf(key, now).Reserve(rule_, now, max_wait);
}

void KeyedLimiter::Refund(const std::string& key) {
  if (!enabled()) return;
  const auto now = clock_();
  std::lock_guard lock(mutex_);
  if (auto* bucket = buckets_.Find(key)) bucket->Refund(rule_, now);
}

std::size_t KeyedLimiter::size() const {
  std::lock_guard lock(mutex_);
  return buckets_.size();
}

}  // namespace charge_outbox::charge_api
