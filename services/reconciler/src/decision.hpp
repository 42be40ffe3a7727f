// The reconciler's decision table: what one look at the acquirer means for a pending charge. What the
// acquirer's answer proves is read by charges::ReadRun, the reading charge-api uses too; this adds what is
// the reconciler's alone: when to look again, the not-found rule, and escalation at the deadline. Pure
// functions over plain data (the clock and the random source are passed in), so every row of the table
// in docs/reconciler.md is a unit test.
//
// The rules, in short (docs/background.md, "Never guess"):
//   - lookup finds our capture (amount, currency, reference match) -> captured; past the deadline -> void it
//   - lookup finds a different capture under our key                -> needs_review, never a fix
//   - no capture attempt on record may ever have left               -> failed, without asking: nothing can
//                                                                       be captured, and a client told only
//                                                                       "retry" is never captured behind its
//                                                                       back by a resubmit
//   - not found, on one look or within the visibility window         -> stay pending, look again
//   - not found on repeated looks past the window                    -> policy: resubmit with the same key
//                                                                       (default), review, or fail (opt-in);
//                                                                       resubmit only a charge with an answered
//                                                                       capture attempt on record (its client
//                                                                       could have been told 202), else review
//   - no usable answer                                              -> stay pending, backoff with jitter
//   - past the deadline and still unconfirmed                        -> needs_review
//   - a void that got no answer                                     -> stay pending, void again later
//   - a void whose 500 the acquirer stored (Stripe)                 -> stay pending, void again later
//                                                                       under a fresh key; a person after 3
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "charge_outbox/acquirer/model.hpp"
#include "charge_outbox/retry/backoff.hpp"
#include "charge_outbox/util/random.hpp"
#include "charge_outbox/charges/charge_store.hpp"
#include "charge_outbox/charges/evidence.hpp"

namespace charge_outbox::reconciler {

// What to do with a charge that has stayed not found at the acquirer past the visibility window. A lookup
// cannot show a decline, a request that never arrived, or a capture still invisible, so "not found" is not
// the acquirer's answer; the default asks for one.
enum class NotFoundPolicy {
  kResubmit,  // capture again with the same idempotency key before the deadline: the acquirer deduplicates
              // and answers for sure (the capture, its decline, or a capture made now). The default.
  kReview,    // needs_review (not_found_at_acquirer): a human asks the acquirer
  kFail,      // failed (not_captured) without the acquirer's confirmation. Opt-in: wrong whenever the
              // lookup is wrong (another environment or credential, a lag longer than the window)
};

std::string_view ToString(NotFoundPolicy policy);

struct DecisionOptions {
  std::chrono::milliseconds deadline{std::chrono::hours{1}};              // from the charge's creation
  std::chrono::milliseconds visibility_window{std::chrono::minutes{5}};   // how late a capture may show up
  NotFoundPolicy not_found_policy = NotFoundPolicy::kResubmit;
  int min_not_found_looks = 2;                                            // "never on a single look"
  // The delay before the next look: 30 s doubling up to 15 min, with equal jitter (see NextCheckDelay).
  retry::BackoffOptions backoff{std::chrono::seconds{30}, std::chrono::minutes{15}, retry::Jitter::kEqual};
};

enum class Step {
  kResolve,   // apply `transition` (through ChargeStore::Complete)
  kDefer,     // stay pending; look again after `defer`
  kResubmit,  // capture again with the same key, then DecideAfterResubmit
  kVoid,      // void `capture_id` with the charge's key, then DecideAfterVoid
};

struct Decision {
  Step step = Step::kDefer;
  charges::Transition transition;      // kResolve: to, basis, acquirer_capture_id, decline_code, failure_reason
  std::chrono::milliseconds defer{0};  // kDefer
  std::string capture_id;              // kVoid
  // The acquirer gave no usable answer, or refused our request: the run reports an error (and exits
  // non-zero) even though the charge itself is safe.
  bool error = false;
  std::string_view why;  // one word for the log line
};

// What one lookup by key (the run's last attempt) showed, and what we know about the charge.
struct LookupFacts {
  acquirer::OutcomeKind kind = acquirer::OutcomeKind::kNotFound;
  std::optional<acquirer::Capture> capture;  // kCaptured, kMismatch
  std::optional<std::string> decline_code;   // kDeclined
  bool past_deadline = false;
  // Until the deadline (when not past it): a later look is never put off beyond it, so a charge that stays
  // unresolved is escalated at its deadline, not up to one backoff later.
  std::chrono::milliseconds until_deadline{std::chrono::milliseconds::max()};
  int check_count = 0;  // earlier looks that left the charge pending
  // kNotFound: not-found looks since the last capture that may have been sent, this one included, and
  // how long ago the first of them started, by the database's clock (0 when this look is the first).
  int not_found_looks = 0;
  std::chrono::milliseconds not_found_for{0};
  // AttemptHistory::capture_answered: its client could have been told 202, so a capture made now (with
  // the same key) is one the client was told might still happen.
  bool capture_answered = false;
};

Decision DecideAfterLookup(const LookupFacts& facts, const DecisionOptions& options, util::RandomSource& random);

// Before any lookup: a charge none of whose capture attempts may have left is settled failed (or, with
// a live capture attempt on record, nullopt: ask the acquirer).
std::optional<Decision> DecideBeforeLookup(const charges::AttemptHistory& history);

// What a capture with the same key (policy resubmit) showed. `past_deadline` and `until_deadline` as of
// its answer: a capture answered past the deadline is read as charge-api reads one, a capture to void.
struct ResubmitFacts {
  acquirer::OutcomeKind kind = acquirer::OutcomeKind::kNotSent;
  std::optional<acquirer::Capture> capture;
  std::optional<std::string> decline_code;
  int check_count = 0;
  bool past_deadline = false;
  std::chrono::milliseconds until_deadline{std::chrono::milliseconds::max()};
};

Decision DecideAfterResubmit(const ResubmitFacts& facts, const DecisionOptions& options,
                             util::RandomSource& random);

// What voiding `capture_id` showed (past the deadline).
struct VoidFacts {
  acquirer::OutcomeKind kind = acquirer::OutcomeKind::kNotSent;
  std::string capture_id;
  int check_count = 0;
  // Voids of the charge answered with an error the acquirer stored under their key (Stripe's 500), this
  // one included: each later void goes under a key of its own (acquirer::VoidRequest).
  int stored_errors = 0;
};

// Stored errors after which a void is no longer sent again under a fresh key: the acquirer keeps failing
// the one operation that gives the money back, and a person looks (needs_review, void_unconfirmed).
inline constexpr int kStoredVoidErrorsForReview = 3;

// Confirmed: canceled. No answer (transient), or an error the acquirer stored under the void's key (fewer
// than kStoredVoidErrorsForReview): stay pending, and the next look voids again (under a fresh key after a
// stored error) if the capture still stands. Refused as a request (or a capture not ours): needs_review
// (void_unconfirmed), for a person.
Decision DecideAfterVoid(const VoidFacts& facts, const DecisionOptions& options, util::RandomSource& random);

// The delay before the next look after `check_count` earlier ones left the charge pending: retry::Backoff
// (base * 2^check_count, capped) with options.backoff's jitter, equal by default, uniform in
// [ceiling/2, ceiling): never near zero, so a struggling acquirer is not asked again at once about the same
// charge, and spread so charges that failed together do not come back together.
std::chrono::milliseconds NextCheckDelay(int check_count, const DecisionOptions& options,
                                         util::RandomSource& random);

}  // namespace charge_outbox::reconciler
