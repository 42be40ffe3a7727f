#include "charge_outbox/acquirer/retry_policy.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/uuid/random_generator.hpp>
#include <boost/uuid/uuid_io.hpp>

#include <algorithm>
#include <stdexcept>

namespace charge_outbox::acquirer {

namespace asio = boost::asio;
using std::chrono::milliseconds;

Mt19937RandomSource::Mt19937RandomSource() : Mt19937RandomSource((std::uint64_t{std::random_device{}()} << 32) ^
                                                                  std::uint64_t{std::random_device{}()}) {}

Mt19937RandomSource::Mt19937RandomSource(std::uint64_t seed) : seed_(seed), engine_(seed) {}

double Mt19937RandomSource::NextUnit() {
  std::lock_guard lock(mutex_);
  return std::uniform_real_distribution<double>(0.0, 1.0)(engine_);
}

std::chrono::steady_clock::time_point AsioSteadyClock::SteadyNow() { return std::chrono::steady_clock::now(); }

std::chrono::system_clock::time_point AsioSteadyClock::WallNow() { return std::chrono::system_clock::now(); }

asio::awaitable<void> AsioSteadyClock::SleepFor(milliseconds delay) {
  asio::steady_timer timer(co_await asio::this_coro::executor, delay);
  // A cancelled sleep (executor shutting down) simply ends early; the next attempt or the caller decides.
  co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
}

RetryPolicy::RetryPolicy(RetryPolicyOptions options, std::shared_ptr<RandomSource> random)
    : options_(options), random_(std::move(random)) {
  if (options_.max_attempts < 1) throw std::invalid_argument("retry: max_attempts must be at least 1");
  if (options_.base_delay < milliseconds{0} || options_.max_delay < options_.base_delay) {
    throw std::invalid_argument("retry: need 0 <= base_delay <= max_delay");
  }
  if (options_.total_budget < milliseconds{0}) throw std::invalid_argument("retry: total_budget must be >= 0");
  if (random_ == nullptr) throw std::invalid_argument("retry: a random source is required");
}

milliseconds RetryPolicy::BackoffCeiling(int retry_index) const {
  const auto base = options_.base_delay.count();
  const auto cap = options_.max_delay.count();
  if (retry_index < 0) return milliseconds{std::min(base, cap)};
  // Doubling stops as soon as the cap is reached, so no shift can overflow.
  auto ceiling = base;
  for (int i = 0; i < retry_index && ceiling < cap; ++i) ceiling = ceiling > cap / 2 ? cap : ceiling * 2;
  return milliseconds{std::min(ceiling, cap)};
}

RetryDecision RetryPolicy::Decide(const AttemptOutcome& outcome, int attempts_made, milliseconds elapsed) const {
  switch (outcome.retryability()) {
    case Retryability::kDefinitive:
      return {RetryVerdict::kStopAnswered, milliseconds{0}};
    case Retryability::kNever:
      return {RetryVerdict::kStopNotRetryable, milliseconds{0}};
    case Retryability::kTransient:
      break;
  }
  if (Draining()) return {RetryVerdict::kStopDraining, milliseconds{0}};
  if (attempts_made >= options_.max_attempts) return {RetryVerdict::kStopAttemptsExhausted, milliseconds{0}};
  const auto remaining = options_.total_budget - elapsed;
  if (remaining <= milliseconds{0}) return {RetryVerdict::kStopBudgetExhausted, milliseconds{0}};

  // Full jitter: uniform in [0, ceiling). Spreads retries of many callers hit by the same outage.
  const auto ceiling = BackoffCeiling(attempts_made - 1);
  const double unit = std::clamp(random_->NextUnit(), 0.0, 1.0);
  auto delay = milliseconds{static_cast<milliseconds::rep>(static_cast<double>(ceiling.count()) * unit)};
  delay = std::min(delay, ceiling - milliseconds{ceiling.count() > 0 ? 1 : 0});
  if (outcome.retry_after.has_value()) {
    const auto asked = std::chrono::duration_cast<milliseconds>(*outcome.retry_after);
    // Retrying early would disobey the acquirer; waiting past the budget would break ours: stop.
    if (asked >= remaining) return {RetryVerdict::kStopRetryAfterBeyondBudget, milliseconds{0}};
    delay = std::max(delay, asked);
  }
  if (delay >= remaining) return {RetryVerdict::kStopBudgetExhausted, milliseconds{0}};
  return {RetryVerdict::kRetry, delay};
}

EvidenceClass RetryRun::evidence() const {
  if (attempts.empty()) return EvidenceClass::kNotSent;
  const auto final_evidence = last().evidence();
  switch (final_evidence) {
    case EvidenceClass::kApproved:
    case EvidenceClass::kDeclined:
      return final_evidence;
    case EvidenceClass::kNotSent:
    case EvidenceClass::kUnknown:
      break;
  }
  const bool all_not_sent = std::all_of(attempts.begin(), attempts.end(), [](const AttemptRecord& record) {
    return record.outcome.evidence() == EvidenceClass::kNotSent;
  });
  return all_not_sent ? EvidenceClass::kNotSent : EvidenceClass::kUnknown;
}

asio::awaitable<RetryRun> RunWithRetries(const RetryPolicy& policy, RetryClock& clock, AttemptFunction attempt,
                                         AttemptObserver* observer, std::optional<std::string> first_request_id) {
  RetryRun run;
  const auto first_start = clock.SteadyNow();
  for (int attempt_no = 1;; ++attempt_no) {
    AttemptContext context{attempt_no, attempt_no == 1 && first_request_id.has_value() ? std::move(*first_request_id)
                                                                                        : NewRequestId()};
    AttemptRecord record;
    record.attempt_no = attempt_no;
    record.request_id = context.request_id;
    record.started_at = clock.WallNow();
    if (observer != nullptr) co_await observer->OnAttemptStarted(context, record.started_at);
    record.outcome = co_await attempt(context);
    record.finished_at = clock.WallNow();
    if (observer != nullptr) co_await observer->OnAttemptFinished(record);
    run.attempts.push_back(std::move(record));

    const auto elapsed = std::chrono::duration_cast<milliseconds>(clock.SteadyNow() - first_start);
    const auto decision = policy.Decide(run.attempts.back().outcome, attempt_no, elapsed);
    if (decision.verdict != RetryVerdict::kRetry) {
      run.stop = decision.verdict;
      co_return run;
    }
    co_await clock.SleepFor(decision.delay);
    if (policy.Draining()) {
      run.stop = RetryVerdict::kStopDraining;
      co_return run;
    }
  }
}

std::string NewRequestId() {
  // random_generator reads the operating system's entropy; one per thread avoids locking.
  thread_local boost::uuids::random_generator generator;
  return boost::uuids::to_string(generator());
}

std::string_view ToString(RetryVerdict verdict) {
  switch (verdict) {
    case RetryVerdict::kRetry: return "retry";
    case RetryVerdict::kStopAnswered: return "answered";
    case RetryVerdict::kStopNotRetryable: return "not_retryable";
    case RetryVerdict::kStopAttemptsExhausted: return "attempts_exhausted";
    case RetryVerdict::kStopBudgetExhausted: return "budget_exhausted";
    case RetryVerdict::kStopRetryAfterBeyondBudget: return "retry_after_beyond_budget";
    case RetryVerdict::kStopDraining: return "draining";
  }
  return "?";
}

}  // namespace charge_outbox::acquirer
