#include "charge_outbox/charges/settlement.hpp"

#include <spdlog/spdlog.h>

#include "charge_outbox/charges/evidence.hpp"
#include "charge_outbox/db/retry.hpp"
#include "charge_outbox/log/log.hpp"

namespace charge_outbox::charges {

boost::asio::awaitable<db::DbResult<Settlement>> Settle(ChargeStore& store, const Charge& charge,
                                                        const Transition& transition,
                                                        const std::optional<AttemptFinish>& attempt) {
  const auto complete_call = [&] { return store.Complete(charge.id, transition, attempt); };
  const auto done = co_await db::WithDbRetries(complete_call);
  if (!done) co_return done.error();
  if (done->applied) co_return Settlement{SettleOutcome::kApplied, done->charge, std::nullopt, std::nullopt};
  if (done->refused) co_return Settlement{SettleOutcome::kRefused, done->charge, std::nullopt, done->refused};

  const auto& winner = done->charge;
  const auto contradiction = Contradiction(transition, winner);
  if (!contradiction) co_return Settlement{SettleOutcome::kLost, winner, std::nullopt, std::nullopt};

  const auto trace_id = log::TraceIdOf(transition.traceparent);
  log::WithTrace(trace_id, spdlog::level::err,
                 "charge {}: the acquirer proves {} ({}) but the charge was already {} ({}); flagged for review: {}",
                 charge.public_id(), ToString(transition.to), transition.acquirer_capture_id.value_or("no capture id"),
                 ToString(winner.status), winner.failure_reason.value_or(winner.decline_code.value_or("no reason")),
                 *contradiction);
  const auto flag_call = [&] {
    return store.FlagForReview(charge.id, winner.status, *contradiction, transition.traceparent);
  };
  const auto flagged = co_await db::WithDbRetries(flag_call);
  if (!flagged) {
    log::WithTrace(trace_id, spdlog::level::err, "charge {}: flagging the contradiction for review failed: {}",
                   charge.public_id(), flagged.error().detail);
    co_return Settlement{SettleOutcome::kUnflagged, winner, contradiction, std::nullopt};
  }
  if (*flagged) co_return Settlement{SettleOutcome::kFlagged, **flagged, contradiction, std::nullopt};
  // Its status changed again meanwhile: another actor flagged it first, or so it should be. What it is now
  // decides; the winner read before is stale, and answering with it would repeat the contradicted state.
  const auto read_call = [&] { return store.FindById(charge.merchant_id, charge.id); };
  const auto now = co_await db::WithDbRetries(read_call);
  if (now && *now && (*now)->status == ChargeStatus::kNeedsReview) {
    co_return Settlement{SettleOutcome::kFlagged, **now, contradiction, std::nullopt};
  }
  log::WithTrace(trace_id, spdlog::level::err, "charge {}: the contradiction is not flagged and the charge is {}",
                 charge.public_id(), now && *now ? ToString((*now)->status) : "unreadable");
  co_return Settlement{SettleOutcome::kUnflagged, now && *now ? **now : winner, contradiction, std::nullopt};
}

Charge UnderReview(Charge charge, const std::string& contradiction) {
  charge.status = ChargeStatus::kNeedsReview;
  charge.failure_reason = contradiction;
  charge.response_status.reset();
  charge.response_body.reset();
  return charge;
}

}  // namespace charge_outbox::charges
