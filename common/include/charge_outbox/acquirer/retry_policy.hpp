// Retry policy for acquirer calls: a maximum number of attempts over retry::Backoff (exponential, full
// jitter, a cap, a total time budget, honouring Retry-After); and RunWithRetries, which runs one
// operation under a policy and returns every attempt so the caller can record each one.
//
// Only transient outcomes are retried (retry::Retryability::kTransient: not sent, unknown with the same key,
// 429, 503, 409 in flight). A decline, a confirmed answer or a contract error is never retried. Every
// retry repeats the same operation, so the idempotency key never changes; each attempt gets a fresh
// request id.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "charge_outbox/acquirer/model.hpp"
#include "charge_outbox/retry/backoff.hpp"
#include "charge_outbox/util/clock.hpp"
#include "charge_outbox/util/random.hpp"

namespace charge_outbox::acquirer {

struct RetryPolicyOptions {
  int max_attempts = 4;  // attempts in all, the first one included
  // Ceilings 1, 2, 4 s, capped at 8 s, full jitter; no attempt starts 15 s after the first one did.
  retry::BackoffOptions backoff{std::chrono::milliseconds{1000}, std::chrono::milliseconds{8000}, retry::Jitter::kFull,
                                std::chrono::milliseconds{15000}};
};

enum class RetryVerdict {
  kRetry,
  kStopAnswered,               // a definitive answer (approved, declined, found, not found, voided, a page)
  kStopNotRetryable,           // a contract error or a mismatch: stop until someone fixes it
  kStopAttemptsExhausted,      // max_attempts made
  kStopBudgetExhausted,        // the next attempt would start past the budget
  kStopRetryAfterBeyondBudget, // the acquirer asked us to wait longer than the budget has left
  kStopDraining,               // the process is shutting down: no new attempt after the one in flight
  kStopRefused,                // the observer refused to put an attempt on record (AttemptObserver::StopRun)
};

struct RetryDecision {
  RetryVerdict verdict = RetryVerdict::kStopAnswered;
  std::chrono::milliseconds delay{0};  // how long to wait before the next attempt; kRetry only
};

// Immutable after construction; thread-safe when its util::RandomSource is.
class RetryPolicy {
 public:
  // Throws std::invalid_argument on nonsensical options (start-up only).
  RetryPolicy(RetryPolicyOptions options, std::shared_ptr<util::RandomSource> random);

  // What to do after attempt number `attempts_made` (1-based) produced `outcome`, `elapsed` after the
  // first attempt started. The wait before retry n (n = attempts_made - 1, from 0) is retry::Backoff's:
  // with full jitter, uniform in [0, min(max, base * 2^n)); a Retry-After raises it to at least its value. The
  // budget bounds when an attempt may start, not when it ends: an attempt in flight is never cut short,
  // because cutting it short only turns answers into unknowns.
  RetryDecision Decide(const AttemptOutcome& outcome, int attempts_made, std::chrono::milliseconds elapsed) const;

  // min(max, base * 2^retry_index), saturating.
  std::chrono::milliseconds BackoffCeiling(int retry_index) const { return backoff_.Ceiling(retry_index); }

  const RetryPolicyOptions& options() const { return options_; }

  // From now on every run stops after its attempt in flight (kStopDraining), and a run waiting out a
  // backoff stops when it wakes: a process shutting down ends its runs within one attempt or one backoff,
  // instead of a whole budget. Thread-safe; shared by copies of this policy; never undone.
  void StopRetrying() const { draining_->store(true); }
  bool Draining() const { return draining_->load(); }

 private:
  RetryPolicyOptions options_;
  retry::Backoff backoff_;
  std::shared_ptr<util::RandomSource> random_;
  std::shared_ptr<std::atomic<bool>> draining_ = std::make_shared<std::atomic<bool>>(false);
};

// Handed to each attempt.
struct AttemptContext {
  int attempt_no = 1;      // 1-based
  std::string request_id;  // fresh per attempt (a UUID): the X-Request-Id header and the attempts row
};

struct AttemptRecord {
  int attempt_no = 1;
  std::string request_id;
  std::chrono::system_clock::time_point started_at;
  std::chrono::system_clock::time_point finished_at;
  std::chrono::milliseconds elapsed{0};  // from start to finish, by the monotonic clock
  AttemptOutcome outcome;
};

// Hooks around each attempt. A caller that records attempts durably inserts the row in
// OnAttemptStarted (before any byte is sent), so a crash mid-call still leaves the attempt on record,
// and completes it in OnAttemptFinished.
class AttemptObserver {
 public:
  virtual ~AttemptObserver() = default;
  virtual boost::asio::awaitable<void> OnAttemptStarted(const AttemptContext& attempt,
                                                        std::chrono::system_clock::time_point started_at) = 0;
  virtual boost::asio::awaitable<void> OnAttemptFinished(const AttemptRecord& record) = 0;
  // True once the observer refused to put an attempt on record for a reason no retry changes (its caller
  // no longer owns the charge, say): the attempt was not sent, and the run stops after it.
  virtual bool StopRun() const { return false; }
};

struct RetryRun {
  std::vector<AttemptRecord> attempts;  // never empty after RunWithRetries
  RetryVerdict stop = RetryVerdict::kStopAnswered;

  const AttemptOutcome& last() const { return attempts.back().outcome; }

  // What the whole run proves. With one idempotency key an explicit answer (approved, declined) covers
  // every earlier attempt; otherwise a single unknown attempt makes the run unknown, and the run is
  // not_sent only if every attempt was.
  EvidenceClass evidence() const;
};

using AttemptFunction = std::function<boost::asio::awaitable<AttemptOutcome>(AttemptContext attempt)>;

// Runs `attempt` until the policy stops, sleeping on `clock` between attempts. `observer` may be null.
// `first_request_id`: the id of attempt 1 when the caller recorded it before the run (with the intent),
// so the record and the wire agree; later attempts always get fresh ids.
boost::asio::awaitable<RetryRun> RunWithRetries(const RetryPolicy& policy, util::Clock& clock, AttemptFunction attempt,
                                                AttemptObserver* observer = nullptr,
                                                std::optional<std::string> first_request_id = std::nullopt);

// A fresh random UUID (version 4), lower-case with dashes: the request id of one attempt.
std::string NewRequestId();

std::string_view ToString(RetryVerdict verdict);

}  // namespace charge_outbox::acquirer
