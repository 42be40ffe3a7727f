#include "charge_outbox/acquirer/retry_policy.hpp"

#include <boost/uuid/random_generator.hpp>
#include <boost/uuid/uuid_io.hpp>

#include <algorithm>
#include <stdexcept>

namespace charge_outbox::acquirer {

namespace asio = boost::asio;
using std::chrono::milliseconds;

RetryPolicy::RetryPolicy(RetryPolicyOptions options, std::shared_ptr<util::RandomSource> random)
    : options_(options),
      backoff_(options.backoff),
      random_(std::move(random)) {
  if (options_.max_attempts < 1) throw std::invalid_argument("retry: max_attempts must be at least 1");
  if (random_ == nullptr) throw std::invalid_argument("retry: a random source is required");
}

RetryDecision RetryPolicy::Decide(const AttemptOutcome& outcome, int attempts_made, milliseconds elapsed) const {
  switch (outcome.retryability()) {
    case retry::Retryability::kDefinitive:
      return {RetryVerdict::kStopAnswered, milliseconds{0}};
    case retry::Retryability::kNever:
      return {RetryVerdict::kStopNotRetryable, milliseconds{0}};
    case retry::Retryability::kTransient:
      break;
  }
  if (Draining()) return {RetryVerdict::kStopDraining, milliseconds{0}};
  if (attempts_made >= options_.max_attempts) return {RetryVerdict::kStopAttemptsExhausted, milliseconds{0}};
  std::optional<milliseconds> retry_after;
  if (outcome.retry_after) retry_after = std::chrono::duration_cast<milliseconds>(*outcome.retry_after);
  const auto wait = backoff_.Next(attempts_made - 1, *random_, elapsed, retry_after);
  switch (wait.verdict) {
    case retry::WaitVerdict::kWait: return {RetryVerdict::kRetry, wait.delay};
    case retry::WaitVerdict::kBudgetExhausted: return {RetryVerdict::kStopBudgetExhausted, milliseconds{0}};
    case retry::WaitVerdict::kRetryAfterBeyondBudget:
      return {RetryVerdict::kStopRetryAfterBeyondBudget, milliseconds{0}};
  }
  return {RetryVerdict::kStopBudgetExhausted, milliseconds{0}};
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

asio::awaitable<RetryRun> RunWithRetries(const RetryPolicy& policy, util::Clock& clock, AttemptFunction attempt,
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
    const auto attempt_start = clock.SteadyNow();
    record.outcome = co_await attempt(context);
    record.finished_at = clock.WallNow();
    record.elapsed = std::chrono::duration_cast<milliseconds>(clock.SteadyNow() - attempt_start);
    if (observer != nullptr) co_await observer->OnAttemptFinished(record);
    run.attempts.push_back(std::move(record));
    if (observer != nullptr && observer->StopRun()) {
      run.stop = RetryVerdict::kStopRefused;
      co_return run;
    }

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
    case RetryVerdict::kStopRefused: return "refused";
  }
  return "?";
}

}  // namespace charge_outbox::acquirer
