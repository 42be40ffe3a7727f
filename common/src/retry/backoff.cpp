#include "charge_outbox/retry/backoff.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "charge_outbox/config/config.hpp"

namespace charge_outbox::retry {

using std::chrono::milliseconds;

Backoff::Backoff(BackoffOptions options) : options_(options) {
  if (options_.base < milliseconds{0} || options_.max < options_.base) {
    throw std::invalid_argument("backoff: need 0 <= base <= max");
  }
  if (options_.budget < milliseconds{0}) throw std::invalid_argument("backoff: budget must be >= 0");
}

milliseconds Backoff::Ceiling(int retry_index) const {
  const auto cap = options_.max.count();
  // Doubling stops as soon as the cap is reached, so no shift can overflow.
  auto ceiling = options_.base.count();
  for (int i = 0; i < retry_index && ceiling < cap; ++i) ceiling = ceiling > cap / 2 ? cap : ceiling * 2;
  return milliseconds{std::min(ceiling, cap)};
}

milliseconds Backoff::Delay(int retry_index, util::RandomSource& random) const {
  const auto ceiling = Ceiling(retry_index);
  const double span = static_cast<double>(ceiling.count());
  const double unit = std::clamp(random.NextUnit(), 0.0, 1.0);
  double delay = 0;
  switch (options_.jitter) {
    case Jitter::kFull: delay = span * unit; break;
    case Jitter::kEqual: delay = span / 2 + unit * span / 2; break;
  }
  // A draw of exactly 1 (or rounding) must not reach the ceiling: the bound is half-open.
  return std::min(milliseconds{static_cast<milliseconds::rep>(delay)},
                  ceiling - milliseconds{ceiling.count() > 0 ? 1 : 0});
}

Wait Backoff::Next(int retry_index, util::RandomSource& random, milliseconds elapsed,
                   std::optional<milliseconds> retry_after) const {
  const bool budgeted = options_.budget != milliseconds::max();
  const auto remaining = budgeted ? options_.budget - elapsed : milliseconds::max();
  if (remaining <= milliseconds{0}) return {WaitVerdict::kBudgetExhausted, milliseconds{0}};
  auto delay = Delay(retry_index, random);
  if (retry_after) {
    if (budgeted && *retry_after >= remaining) return {WaitVerdict::kRetryAfterBeyondBudget, milliseconds{0}};
    delay = std::max(delay, *retry_after);
  }
  if (budgeted && delay >= remaining) return {WaitVerdict::kBudgetExhausted, milliseconds{0}};
  return {WaitVerdict::kWait, delay};
}

BackoffOptions LoadBackoffOptions(config::ConfigReader& reader, std::string_view scope, BackoffOptions defaults,
                                  milliseconds shortest_base, milliseconds longest) {
  const std::string prefix = std::string(scope) + ".backoff.";
  BackoffOptions o = defaults;
  o.base = reader.Duration(prefix + "base", defaults.base, shortest_base, longest);
  o.max = reader.Duration(prefix + "max", defaults.max, milliseconds{0}, longest);
  if (o.max < o.base) throw config::ConfigError(prefix + "max", "must not be shorter than " + prefix + "base");
  if (defaults.budget != milliseconds::max()) {
    o.budget = reader.Duration(prefix + "budget", defaults.budget, milliseconds{0}, longest);
  }
  return o;
}

}  // namespace charge_outbox::retry
