// Backoff: the one schedule of waits between tries, used by every retry in the tree (acquirer calls,
// the reconciler's next look at a pending charge, the relay's and the inbox's loops, the few quick
// database retries, the chaos suite's clients). Exponential from `base`, doubling per retry, capped at
// `max`; jittered; optionally bounded by a total budget; and never sooner than a Retry-After the other
// side sent. A value type: immutable, thread-safe, the randomness passed in (util::RandomSource), so a
// schedule is a pure function that tests can pin exactly.
//
// Jitter (docs/decisions.md, "One backoff, one retryability"):
//   kFull  - uniform in [0, ceiling). The default: it spreads the most the retries of many callers hit by
//            the same outage (requests to the acquirer, chaos clients).
//   kEqual - uniform in [ceiling/2, ceiling). The reconciler's next look at a pending charge: never near
//            zero, so an acquirer that could not answer is not asked again at once about the same charge,
//            yet charges that failed together still come back spread out.
//   A caller alone in its process (the relay's and the inbox's loops, WithDbRetries) waits Ceiling()
//   itself: there is no crowd of its own to spread, and a predictable wait is what its log line and the
//   relay's liveness bound (/healthz) promise.
#pragma once

#include <chrono>
#include <optional>
#include <string_view>

#include "charge_outbox/util/random.hpp"

namespace charge_outbox::config {
class ConfigReader;
}

namespace charge_outbox::retry {

enum class Jitter { kFull, kEqual };

struct BackoffOptions {
  std::chrono::milliseconds base{1000};  // ceiling of the first retry's wait
  std::chrono::milliseconds max{8000};   // cap on the ceiling
  Jitter jitter = Jitter::kFull;
  // No try starts this long after the first one started; max(): no budget (the caller bounds the loop).
  std::chrono::milliseconds budget = std::chrono::milliseconds::max();
};

enum class WaitVerdict {
  kWait,                    // wait `delay`, then try again
  kBudgetExhausted,         // the budget is spent, or the wait would end past it
  kRetryAfterBeyondBudget,  // the other side asked us to wait longer than the budget has left
};

struct Wait {
  WaitVerdict verdict = WaitVerdict::kWait;
  std::chrono::milliseconds delay{0};  // kWait only
};

class Backoff {
 public:
  // Throws std::invalid_argument unless 0 <= base <= max and budget >= 0 (start-up only).
  explicit Backoff(BackoffOptions options);

  // min(max, base * 2^retry_index), saturating (no overflow however many retries); retry_index 0 is the
  // wait before the first retry, and a negative one counts as 0.
  std::chrono::milliseconds Ceiling(int retry_index) const;

  // The jittered wait before retry `retry_index`, strictly below the ceiling (0 when the ceiling is 0).
  // Draws one number from `random`.
  std::chrono::milliseconds Delay(int retry_index, util::RandomSource& random) const;

  // The wait before retry `retry_index`, `elapsed` after the first try started, when the other side asked
  // for `retry_after`: the jittered delay raised to at least `retry_after`, or a stop when the budget
  // cannot hold it. Retrying earlier than asked would disobey the other side; waiting past the budget
  // would break ours. A spent budget is found before any number is drawn.
  Wait Next(int retry_index, util::RandomSource& random, std::chrono::milliseconds elapsed = {},
            std::optional<std::chrono::milliseconds> retry_after = std::nullopt) const;

  const BackoffOptions& options() const { return options_; }

 private:
  BackoffOptions options_;
};

// Reads `<scope>.backoff.base` and `<scope>.backoff.max` and, when `defaults` has a budget,
// `<scope>.backoff.budget`: the one spelling of backoff keys in every daemon (docs/configuration.md).
// `defaults` gives each default (and the jitter, which is not configurable); base is at least
// `shortest_base`, every value at most `longest`. Throws config::ConfigError naming the key at fault.
BackoffOptions LoadBackoffOptions(config::ConfigReader& reader, std::string_view scope, BackoffOptions defaults,
                                  std::chrono::milliseconds shortest_base, std::chrono::milliseconds longest);

}  // namespace charge_outbox::retry
