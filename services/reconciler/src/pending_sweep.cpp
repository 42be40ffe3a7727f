#include "pending_sweep.hpp"

#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>

#include "charge_outbox/failpoints/failpoints.hpp"
#include "charge_outbox/log/log.hpp"
#include "charge_outbox/trace/trace_context.hpp"
#include "charge_outbox/charges/settlement.hpp"
#include "charge_outbox/db/retry.hpp"
#include "decision.hpp"
#include "lookup_by_key.hpp"

namespace charge_outbox::reconciler {
namespace {

namespace asio = boost::asio;
using acquirer::OutcomeKind;
using std::chrono::milliseconds;

constexpr std::string_view kFailpointAfterLookup = "reconciler.after_acquirer_lookup";
// Between a decision and its transition: a test stalls a run here to let another actor act first.
constexpr std::string_view kFailpointBeforeTransition = "reconciler.before_transition";
// Between a void's answer and its transition: a run that voided and died (or stalled) before `canceled`.
constexpr std::string_view kFailpointAfterVoid = "reconciler.after_void";

// The trace of a reconciler transition: a new span in the trace of the request that created the charge,
// so one trace still follows the charge to every consumer. The run's log lines about the charge carry
// that trace's id (log::TraceIdOf), each scoped to its line: the workers interleave on one thread.
std::string TraceparentFor(const charges::Charge& charge) {
  const auto parent = trace::ParseTraceparent(charge.traceparent);
  return (parent ? trace::ChildOf(*parent) : trace::NewTrace()).ToTraceparent();
}

}  // namespace

PendingSweep::PendingSweep(SweepDependencies deps, SweepOptions options, std::string owner_id)
    : deps_(deps), options_(std::move(options)), owner_id_(std::move(owner_id)) {}

asio::awaitable<RunSummary> PendingSweep::Run() {
  RunSummary summary;
  summary.mode = RunMode::kSweep;
  const auto started = deps_.clock.SteadyNow();
  const auto budget_end = started + options_.time_budget;
  std::optional<charges::SweepCursor> cursor;
  for (;;) {
    if (OutOfTime(budget_end)) {
      spdlog::info("{}; the rest waits for the next run",
                   stop_requested_ ? "asked to stop" : "time budget spent");
      break;
    }
    const charges::ClaimRequest request{owner_id_, options_.claim_lease, options_.grace_period, options_.batch_size,
                                        cursor};
    const auto claim_call = [&] { return deps_.store.ClaimDue(request); };
    auto batch = co_await db::WithDbRetries(claim_call);
    if (!batch) {
      ++summary.errors;
      spdlog::error("claiming pending charges failed: database {}: {}", db::ToString(batch.error().code),
                    batch.error().detail);
      break;
    }
    if (batch->charges.empty()) break;
    cursor = batch->next;
    const auto claimed = batch->charges.size();
    co_await ProcessBatch(batch->charges, deps_.clock.SteadyNow(), budget_end, summary);
    if (claimed < static_cast<std::size_t>(options_.batch_size)) break;
  }
  // Claims not worked on (budget spent, or an error left one behind) go back now rather than when their
  // lease runs out, so the next run and charge-api retries need not wait.
  const auto release_call = [&] { return deps_.store.ReleaseAll(owner_id_, options_.grace_period); };
  const auto released = co_await db::WithDbRetries(release_call);
  if (!released) {
    ++summary.errors;
    spdlog::error("giving back unworked claims failed (they expire by themselves): {}", released.error().detail);
  } else if (*released > 0) {
    spdlog::info("{} claimed charge(s) given back unworked", *released);
  }
  summary.duration = std::chrono::duration_cast<milliseconds>(deps_.clock.SteadyNow() - started);
  co_return summary;
}

asio::awaitable<void> PendingSweep::ProcessBatch(std::vector<charges::ClaimedCharge>& batch, SteadyTime claimed_at,
                                                 SteadyTime budget_end, RunSummary& summary) {
  const auto executor = co_await asio::this_coro::executor;
  std::size_t next = 0;
  std::size_t running = 0;
  asio::steady_timer all_done(executor, asio::steady_timer::time_point::max());
  const auto workers = std::min(batch.size(), static_cast<std::size_t>(options_.concurrency));
  if (workers == 0) co_return;
  for (std::size_t i = 0; i < workers; ++i) {
    ++running;
    asio::co_spawn(executor, Work(batch, next, claimed_at, budget_end, summary), [&](std::exception_ptr failure) {
      if (failure) {
        // A bug, not a condition: count it so the run exits non-zero, and leave the claim to expire.
        ++summary.errors;
        try {
          std::rethrow_exception(failure);
        } catch (const std::exception& e) {
          spdlog::error("checking a charge threw: {}", e.what());
        }
      }
      if (--running == 0) all_done.cancel();
    });
  }
  // Workers that found nothing to do may have finished inline while being spawned (the executor is this
  // thread's): then there is nothing to wait for, and the timer would never be cancelled. Otherwise no
  // completion can run between this test and the wait, since both happen on this thread.
  if (running == 0) co_return;
  boost::system::error_code ignored;
  co_await all_done.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
}

asio::awaitable<void> PendingSweep::Work(std::vector<charges::ClaimedCharge>& batch, std::size_t& next,
                                         SteadyTime claimed_at, SteadyTime budget_end, RunSummary& summary) {
  while (next < batch.size() && !OutOfTime(budget_end)) {
    const auto& claimed = batch[next++];
    co_await Check(claimed, claimed_at, summary);
  }
}

asio::awaitable<bool> PendingSweep::Renew(const charges::Charge& charge, RunSummary& summary) {
  const auto trace_id = log::TraceIdOf(charge.traceparent);
  const auto renew_call = [&] { return deps_.charges.RenewLease(charge.id, owner_id_, options_.claim_lease); };
  const auto renewed = co_await db::WithDbRetries(renew_call);
  if (!renewed) {
    ++summary.errors;
    log::WithTrace(trace_id, spdlog::level::err, "charge {}: renewing the claim failed: {}", charge.public_id(),
                   renewed.error().detail);
    co_return false;
  }
  if (!*renewed) {
    ++summary.already_resolved;
    log::WithTrace(trace_id, spdlog::level::info, "charge {}: no longer ours (resolved or taken over); left alone",
                   charge.public_id());
    co_return false;
  }
  co_return true;
}

asio::awaitable<void> PendingSweep::Check(const charges::ClaimedCharge& claimed, SteadyTime claimed_at,
                                          RunSummary& summary) {
  const auto& charge = claimed.charge;
  const auto trace_id = log::TraceIdOf(charge.traceparent);
  ++summary.examined;
  // A charge that waited long in its batch renews its claim first, so the lease covers the work ahead.
  if (deps_.clock.SteadyNow() - claimed_at > options_.claim_lease / 3 && !co_await Renew(charge, summary)) co_return;

  // The record first: a charge none of whose capture attempts may have left was never captured, and its
  // client was told at most "retry". It fails, whatever the acquirer is doing; it is never resubmitted.
  {
    const auto history = co_await ReadHistory(charge, summary);
    if (!history) co_return;
    if (const auto decision = DecideBeforeLookup(*history)) {
      charges::AttemptRecorder none(deps_.charges, charge.id, acquirer::Operation::kLookup, kActor, trace_id);
      co_await Apply(claimed, claimed_at, *decision, none, summary);
      co_return;
    }
  }

  charges::AttemptRecorder log(deps_.charges, charge.id, acquirer::Operation::kLookup, kActor, trace_id);
  const auto run = co_await LookupByKey(deps_.acquirer, deps_.policy, deps_.clock, log, charge);

  if (co_await failpoints::HitAsync(kFailpointAfterLookup)) {
    ++summary.errors;
    co_await log.FlushFinish();
    log::WithTrace(trace_id, spdlog::level::err, "charge {}: failpoint {}: left pending", charge.public_id(),
                   kFailpointAfterLookup);
    co_return;
  }

  const auto& last = run.last();
  LookupFacts facts;
  facts.kind = last.kind;
  facts.capture = last.capture;
  facts.decline_code = last.decline_code;
  // The charge's age by the database's clock when it was claimed, plus this run's monotonic time since.
  const auto age = Age(charge, claimed_at);
  facts.past_deadline = age >= options_.decision.deadline;
  facts.until_deadline = options_.decision.deadline - age;
  facts.check_count = claimed.check_count;
  if (last.kind == OutcomeKind::kNotFound) {
    const auto history = co_await ReadHistory(charge, summary);
    if (!history) {
      co_await log.FlushFinish();
      co_return;
    }
    // This look is not finished on record yet, so it is not in the history: count it here. How long ago
    // the first look started is the database's measure, not this host's clock against the record's.
    facts.not_found_looks = history->not_found_looks + 1;
    facts.capture_answered = history->capture_answered;
    facts.not_found_for = history->first_not_found_age.value_or(milliseconds{0});
  }
  const auto decision = DecideAfterLookup(facts, options_.decision, deps_.random);
  log::WithTrace(trace_id, spdlog::level::debug, "charge {}: lookup {} -> {}", charge.public_id(),
                 acquirer::ToString(last.kind), decision.why);
  switch (decision.step) {
    case Step::kResolve:
    case Step::kDefer: co_await Apply(claimed, claimed_at, decision, log, summary); co_return;
    case Step::kResubmit:
      co_await log.FlushFinish();
      co_await Resubmit(claimed, claimed_at, summary);
      co_return;
    case Step::kVoid:
      co_await log.FlushFinish();
      co_await Void(claimed, claimed_at, decision.capture_id, summary);
      co_return;
  }
}

asio::awaitable<std::optional<charges::AttemptHistory>> PendingSweep::ReadHistory(const charges::Charge& charge,
                                                                                   RunSummary& summary) {
  const auto history_call = [&] { return deps_.charges.ReadAttemptHistory(charge.id); };
  auto history = co_await db::WithDbRetries(history_call);
  if (history) co_return std::move(*history);
  ++summary.errors;
  log::WithTrace(log::TraceIdOf(charge.traceparent), spdlog::level::err,
                 "charge {}: reading its attempt history failed: {}", charge.public_id(), history.error().detail);
  co_return std::nullopt;
}

milliseconds PendingSweep::Age(const charges::Charge& charge, SteadyTime claimed_at) {
  return charge.age + std::chrono::duration_cast<milliseconds>(deps_.clock.SteadyNow() - claimed_at);
}

bool PendingSweep::Refused(const charges::ClaimedCharge& claimed, const charges::AttemptRecorder& log,
                           RunSummary& summary) {
  const auto refusal = log.refusal();
  if (!refusal) return false;
  const auto& charge = claimed.charge;
  switch (*refusal) {
    case charges::Refusal::kNotOwner:
      // The claim ran out (this run was slow) and someone else holds or resolved the charge: leave it.
      ++summary.already_resolved;
      break;
    case charges::Refusal::kPastDeadline:
    case charges::Refusal::kVoidOnRecord:
      // Left pending: the next look reads the acquirer again and voids or escalates by the deadline rules.
      ++summary.still_pending;
      break;
  }
  log::WithTrace(log::TraceIdOf(charge.traceparent), spdlog::level::info, "charge {}: nothing sent ({}); left alone",
                 charge.public_id(), charges::ToString(*refusal));
  return true;
}

asio::awaitable<void> PendingSweep::Resubmit(const charges::ClaimedCharge& claimed, SteadyTime claimed_at,
                                             RunSummary& summary) {
  const auto& charge = claimed.charge;
  const auto trace_id = log::TraceIdOf(charge.traceparent);
  // Each capture attempt is recorded only while this run's claim holds (recording renews it) and before
  // the deadline: a run that stalled past its claim sends nothing.
  charges::AttemptRecorder log(deps_.charges, charge.id, acquirer::Operation::kCapture, kActor, trace_id,
                               charges::Ownership{{owner_id_, options_.claim_lease}, options_.decision.deadline});
  const acquirer::CaptureRequest capture{charges::AcquirerIdempotencyKey(charge), charge.amount, charge.currency,
                                         charge.public_id(), charge.payment_method};
  const auto capture_call = [&](std::string request_id) {
    return deps_.acquirer.Capture(capture, std::move(request_id));
  };
  const auto run = co_await charges::RunRecorded(deps_.policy, deps_.clock, log, capture_call);
  if (Refused(claimed, log, summary)) {
    co_await log.FlushFinish();
    co_return;
  }
  const auto& last = run.last();
  const auto age = Age(charge, claimed_at);
  const ResubmitFacts facts{last.kind, last.capture, last.decline_code, claimed.check_count,
                            age >= options_.decision.deadline, options_.decision.deadline - age};
  const auto decision = DecideAfterResubmit(facts, options_.decision, deps_.random);
  log::WithTrace(trace_id, spdlog::level::info,
                 "charge {}: not found past the visibility window; resubmitted with the same key: {} -> {}",
                 charge.public_id(), acquirer::ToString(last.kind), decision.why);
  if (decision.step == Step::kVoid) {
    // Answered past the deadline: what charge-api would leave for the reconciler, this run voids now.
    co_await log.FlushFinish();
    co_await Void(claimed, claimed_at, decision.capture_id, summary);
    co_return;
  }
  co_await Apply(claimed, claimed_at, decision, log, summary);
}

asio::awaitable<void> PendingSweep::Void(const charges::ClaimedCharge& claimed, SteadyTime claimed_at,
                                         const std::string& capture_id, RunSummary& summary) {
  const auto& charge = claimed.charge;
  const auto trace_id = log::TraceIdOf(charge.traceparent);
  // Recorded (so sent) only while this run's claim holds. Once on record, no capture of the charge lands
  // any more (ChargeStore::Complete), whoever read one before.
  charges::AttemptRecorder log(deps_.charges, charge.id, acquirer::Operation::kVoid, kActor, trace_id,
                               charges::Ownership{{owner_id_, options_.claim_lease}, options_.decision.deadline});
  // Earlier voids whose error the acquirer stored under their key: that key only replays the error.
  const auto history = co_await ReadHistory(charge, summary);
  if (!history) co_return;
  // The charge's own key: the acquirer keeps void keys apart from capture keys, and one key per charge
  // makes a repeated void (after a crash) the same void.
  const acquirer::VoidRequest request{capture_id, charges::AcquirerIdempotencyKey(charge),
                                      history->void_stored_errors};
  const auto void_call = [&](std::string request_id) { return deps_.acquirer.Void(request, std::move(request_id)); };
  const auto run = co_await charges::RunRecorded(deps_.policy, deps_.clock, log, void_call);
  if (Refused(claimed, log, summary)) {
    co_await log.FlushFinish();
    co_return;
  }
  if (co_await failpoints::HitAsync(kFailpointAfterVoid)) {
    ++summary.errors;
    co_await log.FlushFinish();
    log::WithTrace(trace_id, spdlog::level::err, "charge {}: failpoint {}: left pending", charge.public_id(),
                   kFailpointAfterVoid);
    co_return;
  }
  const auto stored_error = run.last().kind == acquirer::OutcomeKind::kStoredError ? 1 : 0;
  const VoidFacts facts{run.last().kind, capture_id, claimed.check_count, history->void_stored_errors + stored_error};
  const auto decision = DecideAfterVoid(facts, options_.decision, deps_.random);
  log::WithTrace(trace_id, spdlog::level::info, "charge {}: captured but past its deadline; void {}: {}",
                 charge.public_id(), acquirer::ToString(run.last().kind), decision.why);
  co_await Apply(claimed, claimed_at, decision, log, summary);
}

asio::awaitable<void> PendingSweep::Apply(const charges::ClaimedCharge& claimed, SteadyTime claimed_at,
                                          const Decision& decision, charges::AttemptRecorder& log,
                                          RunSummary& summary) {
  const auto& charge = claimed.charge;
  const auto trace_id = log::TraceIdOf(charge.traceparent);
  if (decision.step == Step::kResolve && co_await failpoints::HitAsync(kFailpointBeforeTransition)) {
    ++summary.errors;
    co_await log.FlushFinish();
    log::WithTrace(trace_id, spdlog::level::err, "charge {}: failpoint {}: left pending", charge.public_id(),
                   kFailpointBeforeTransition);
    co_return;
  }
  if (decision.error) ++summary.errors;
  const auto finish = log.TakeLastFinish();
  switch (decision.step) {
    case Step::kDefer: {
      const auto reschedule_call = [&] { return deps_.store.Reschedule(charge.id, owner_id_, decision.defer, finish); };
      const auto done = co_await db::WithDbRetries(reschedule_call);
      if (!done) {
        ++summary.errors;
        log::WithTrace(trace_id, spdlog::level::err, "charge {}: scheduling its next check failed: {}",
                       charge.public_id(), done.error().detail);
      } else if (!*done) {
        ++summary.already_resolved;
      } else {
        ++summary.still_pending;
        // An error (no usable answer) is logged as one, with the acquirer's status when it gave one.
        const auto status = finish && finish->http_status ? " HTTP " + std::to_string(*finish->http_status) : "";
        log::WithTrace(trace_id, decision.error ? spdlog::level::err : spdlog::level::info,
                       "charge {} stays pending ({}{}); next check in {} s", charge.public_id(), decision.why, status,
                       decision.defer.count() / 1000);
      }
      co_return;
    }
    case Step::kResolve: {
      auto transition = decision.transition;
      transition.owner_id = owner_id_;
      transition.deadline = options_.decision.deadline;
      transition.traceparent = TraceparentFor(charge);
      const auto settled = co_await charges::Settle(deps_.charges, charge, transition, finish);
      if (!settled) {
        // The acquirer's answer is known but not recorded: the claim is given back at the end of the run
        // and the next run asks again and records the same truth.
        ++summary.errors;
        log::WithTrace(trace_id, spdlog::level::err, "charge {}: recording {} failed: {}", charge.public_id(),
                       charges::ToString(transition.to), settled.error().detail);
        co_return;
      }
      switch (settled->outcome) {
        case charges::SettleOutcome::kApplied:
          summary.CountResolved(transition.to);
          log::WithTrace(trace_id, spdlog::level::info, "charge {} -> {} ({}{}{})", charge.public_id(),
                         charges::ToString(transition.to), decision.why, transition.failure_reason ? ": " : "",
                         transition.failure_reason.value_or(""));
          break;
        case charges::SettleOutcome::kLost:
          ++summary.already_resolved;
          log::WithTrace(trace_id, spdlog::level::info,
                         "charge {}: {} not applied; someone else holds or resolved it ({})", charge.public_id(),
                         charges::ToString(transition.to), charges::ToString(settled->charge.status));
          break;
        case charges::SettleOutcome::kFlagged:
          // Settle logged the contradiction as an error; the charge is with a human now.
          summary.CountResolved(charges::ChargeStatus::kNeedsReview);
          break;
        case charges::SettleOutcome::kUnflagged:
          // A proof against the recorded state that is not on record as a contradiction: never counted as
          // resolved. The run fails (and alerts); the window report over its day flags it if no one has.
          ++summary.errors;
          log::WithTrace(trace_id, spdlog::level::err,
                         "charge {}: the acquirer's answer ({}) contradicts its state {} and the review flag did not "
                         "land ({})",
                         charge.public_id(), charges::ToString(transition.to), charges::ToString(settled->charge.status),
                         settled->contradiction.value_or(""));
          break;
        case charges::SettleOutcome::kRefused:
          switch (*settled->refusal) {
            case charges::Refusal::kNotOwner:
              ++summary.already_resolved;
              log::WithTrace(trace_id, spdlog::level::info, "charge {}: {} not applied; the claim is no longer ours",
                             charge.public_id(), charges::ToString(transition.to));
              break;
            case charges::Refusal::kPastDeadline:
            case charges::Refusal::kVoidOnRecord:
              // A live capture that may not be kept: past the deadline, or one a void was already sent for.
              log::WithTrace(trace_id, spdlog::level::info, "charge {}: its capture is not recorded ({}); voiding it",
                             charge.public_id(), charges::ToString(*settled->refusal));
              co_await Void(claimed, claimed_at, transition.acquirer_capture_id.value_or(""), summary);
              break;
          }
          break;
      }
      co_return;
    }
    case Step::kResubmit:
    case Step::kVoid:
      // Only DecideAfterLookup asks for these, and Check follows them itself.
      ++summary.errors;
      log::WithTrace(trace_id, spdlog::level::err, "charge {}: unexpected follow-up step ({})", charge.public_id(),
                     decision.why);
      co_return;
  }
}

}  // namespace charge_outbox::reconciler
