#include "window_reconciliation.hpp"

#include <spdlog/spdlog.h>

#include <set>

#include "charge_outbox/charges/attempt_recorder.hpp"
#include "charge_outbox/db/retry.hpp"
#include "charge_outbox/log/log.hpp"
#include "charge_outbox/trace/trace_context.hpp"
#include "charge_outbox/util/time.hpp"
#include "lookup_by_key.hpp"

namespace charge_outbox::reconciler {
namespace {

namespace asio = boost::asio;
namespace json = boost::json;
using acquirer::OutcomeKind;
using charges::ChargeStatus;

// Our charges are read by id in chunks, so one statement never carries an unbounded array.
constexpr std::size_t kIdsPerRead = 1000;

std::string_view ToString(acquirer::ListEnd end) {
  switch (end) {
    case acquirer::ListEnd::kComplete: return "complete";
    case acquirer::ListEnd::kPageFailed: return "page_failed";
    case acquirer::ListEnd::kTokenRepeated: return "page_token_repeated";
  }
  return "?";
}

}  // namespace

WindowReconciliation::WindowReconciliation(WindowDependencies deps, WindowOptions options)
    : deps_(deps), options_(options) {}

asio::awaitable<WindowResult> WindowReconciliation::Run(std::chrono::system_clock::time_point from,
                                                         std::chrono::system_clock::time_point to) {
  WindowResult result;
  auto& summary = result.summary;
  auto& report = result.report;
  summary.mode = RunMode::kWindow;
  const auto started = deps_.clock.SteadyNow();
  auto finish = [&] {
    summary.duration =
        std::chrono::duration_cast<std::chrono::milliseconds>(deps_.clock.SteadyNow() - started);
    report["errors"] = summary.errors;
  };
  report["window"] = json::object{{"from", util::FormatRfc3339(from)}, {"to", util::FormatRfc3339(to)}};
  // A window that closed less than a visibility window ago may still gain captures the acquirer has made
  // but does not show yet: it is compared and reported, and nothing is flagged on it.
  const bool settled = to + options_.visibility_window <= deps_.clock.WallNow();
  report["settled"] = settled;

  // The acquirer's side: every page.
  const acquirer::ListWindow window{from, to, options_.page_limit};
  const auto listing = co_await acquirer::ListByWindow(deps_.acquirer, window, deps_.policy, deps_.clock);
  report["acquirer"] = json::object{{"captures", listing.captures.size()}, {"pages", listing.pages}};
  if (listing.end != acquirer::ListEnd::kComplete) {
    ++summary.errors;
    report["complete"] = false;
    report["listing_end"] = ToString(listing.end);
    if (listing.failed_page) report["listing_error"] = listing.failed_page->last().detail;
    spdlog::error("the acquirer's listing could not be read to its end ({}): nothing compared, nothing flagged",
                  ToString(listing.end));
    finish();
    co_return result;
  }
  report["complete"] = true;

  // Ours: every charge a capture names (any status), and our captured charges whose capture may lie in
  // the window.
  std::set<std::string> ids;
  for (const auto& capture : listing.captures) {
    if (const auto uuid = charges::UuidFromPublicId(capture.reference)) ids.insert(*uuid);
  }
  std::vector<charges::Charge> referenced;
  std::vector<std::string> chunk;
  auto read_chunk = [&]() -> asio::awaitable<bool> {
    const auto read_call = [&] { return deps_.store.FindByIds(chunk); };
    auto found = co_await db::WithDbRetries(read_call);
    chunk.clear();
    if (!found) {
      spdlog::error("reading our charges failed: {}", found.error().detail);
      co_return false;
    }
    for (auto& c : *found) referenced.push_back(std::move(c));
    co_return true;
  };
  for (const auto& id : ids) {
    chunk.push_back(id);
    if (chunk.size() == kIdsPerRead && !co_await read_chunk()) {
      ++summary.errors;
      finish();
      co_return result;
    }
  }
  if (!chunk.empty() && !co_await read_chunk()) {
    ++summary.errors;
    finish();
    co_return result;
  }
  const auto created_after = from - options_.capture_horizon;
  const auto window_call = [&] {
    return deps_.store.FindCapturedInWindow(from, to, created_after, options_.visibility_window);
  };
  const auto captured = co_await db::WithDbRetries(window_call);
  if (!captured) {
    ++summary.errors;
    spdlog::error("reading our captured charges failed: {}", captured.error().detail);
    finish();
    co_return result;
  }

  auto comparison = CompareWindow(listing.captures, referenced, *captured);

  // Our captured charges the listing does not show: ask by key. A capture just outside the window is
  // found and agrees; a missing one is a discrepancy; no answer leaves it unverified (an error).
  int confirmed_outside = 0;
  json::array unverified;
  for (const auto& charge : comparison.unlisted) {
    charges::AttemptRecorder log(deps_.charges, charge.id, acquirer::Operation::kLookup, kActor,
                                 log::TraceIdOf(charge.traceparent));
    const auto run = co_await LookupByKey(deps_.acquirer, deps_.policy, deps_.clock, log, charge);
    co_await log.FlushFinish();
    const auto& last = run.last();
    switch (last.kind) {
      case OutcomeKind::kCaptured:
      case OutcomeKind::kMismatch: {
        auto fields = DifferingFields(*last.capture, charge);
        if (fields.empty()) {
          ++confirmed_outside;
        } else {
          comparison.discrepancies.push_back(
              {DiscrepancyKind::kMismatch, last.capture, charge, std::move(fields), false});
        }
        break;
      }
      case OutcomeKind::kNotFound:
        comparison.discrepancies.push_back({DiscrepancyKind::kMissingAtAcquirer, std::nullopt, charge, {}, false});
        break;
      case OutcomeKind::kDeclined:
      case OutcomeKind::kVoided:
      case OutcomeKind::kPage:
      case OutcomeKind::kNotSent:
      case OutcomeKind::kTimedOut:
      case OutcomeKind::kConnectionDropped:
      case OutcomeKind::kServerError:
      case OutcomeKind::kUnavailable:
      case OutcomeKind::kThrottled:
      case OutcomeKind::kInFlight:
      case OutcomeKind::kUntrustedResponse:
      case OutcomeKind::kContractError:
        ++summary.errors;
        unverified.push_back(
            json::object{{"charge_id", charge.public_id()}, {"outcome", acquirer::ToString(last.kind)}});
        break;
    }
  }

  int orphans_recorded = 0;
  for (auto& discrepancy : comparison.discrepancies) {
    if (settled && discrepancy.kind == DiscrepancyKind::kCaptureWithoutLocalRecord) {
      co_await Keep(discrepancy, from, to, summary);
      if (discrepancy.recorded) ++orphans_recorded;
    } else if (settled) {
      co_await Flag(discrepancy, summary);
    }
    ++summary.discrepancies[std::string(ToString(discrepancy.kind))];
  }
  if (!settled && !comparison.discrepancies.empty()) {
    spdlog::warn("{} discrepancy(ies) in a window that closed less than {} s ago: reported, none flagged; a report "
                 "after the window settles decides",
                 comparison.discrepancies.size(), options_.visibility_window.count() / 1000);
  }

  summary.examined = static_cast<std::int64_t>(listing.captures.size() + comparison.unlisted.size());
  json::array discrepancies;
  for (const auto& d : comparison.discrepancies) discrepancies.push_back(DiscrepancyJson(d));
  report["local"] = json::object{{"captured_in_window", captured->size()}, {"referenced", referenced.size()}};
  report["matched"] = comparison.matched;
  report["confirmed_outside_window"] = confirmed_outside;
  report["pending_with_capture"] = comparison.pending_with_capture;
  report["discrepancies"] = std::move(discrepancies);
  report["unverified"] = std::move(unverified);
  report["flagged"] = summary.needs_review;
  report["orphans_recorded"] = orphans_recorded;
  finish();
  co_return result;
}

// A capture without a charge of ours has nothing of ours to flag: it is kept for a person, who voids or
// adopts it with charge-admin (docs/operations.md). Only on a settled window, like a flag.
asio::awaitable<void> WindowReconciliation::Keep(Discrepancy& orphan, std::chrono::system_clock::time_point from,
                                                 std::chrono::system_clock::time_point to, RunSummary& summary) {
  const auto& capture = *orphan.capture;
  const auto record_call = [&] { return deps_.orphans.Record(capture, from, to); };
  const auto recorded = co_await db::WithDbRetries(record_call);
  if (!recorded) {
    ++summary.errors;
    spdlog::error("capture {} ({} {}, reference {}) has no charge of ours, and keeping it for a person failed: {}",
                  capture.id, capture.amount, capture.currency, capture.reference.substr(0, 80),
                  recorded.error().detail);
    co_return;
  }
  orphan.recorded = std::string(charges::ToString(*recorded));
  if (*recorded == charges::OrphanStatus::kOpen) {
    spdlog::warn("capture {} ({} {}, reference {}) has no charge of ours: kept for a person (charge-admin orphan "
                 "show {})",
                 capture.id, capture.amount, capture.currency, capture.reference.substr(0, 80), capture.id);
  }
}

asio::awaitable<void> WindowReconciliation::Flag(Discrepancy& discrepancy, RunSummary& summary) {
  if (!discrepancy.charge) co_return;  // a capture without a charge: Keep's
  const auto& charge = *discrepancy.charge;
  const std::string reason = "window_" + std::string(ToString(discrepancy.kind));
  const auto parent = trace::ParseTraceparent(charge.traceparent);
  const auto traceparent = (parent ? trace::ChildOf(*parent) : trace::NewTrace()).ToTraceparent();
  const auto trace_id = log::TraceIdOf(traceparent);  // what the lines about the charge carry
  switch (charge.status) {
    case ChargeStatus::kNeedsReview: co_return;  // already with a human
    case ChargeStatus::kPending: {
      // Out of pending only through the charge state machine's one transition. The listing is the
      // acquirer's own answer, so it lands whoever holds the charge.
      charges::Transition transition;
      transition.to = ChargeStatus::kNeedsReview;
      transition.failure_reason = reason;
      transition.traceparent = traceparent;
      const std::optional<charges::AttemptFinish> no_attempt;
      const auto complete_call = [&] { return deps_.charges.Complete(charge.id, transition, no_attempt); };
      const auto done = co_await db::WithDbRetries(complete_call);
      if (!done) {
        ++summary.errors;
        log::WithTrace(trace_id, spdlog::level::err, "charge {}: flagging for review failed: {}", charge.public_id(),
                       done.error().detail);
      } else if (done->applied) {
        discrepancy.flagged = true;
        ++summary.needs_review;
      }
      co_return;
    }
    case ChargeStatus::kCaptured:
    case ChargeStatus::kFailed:
    case ChargeStatus::kCanceled: {
      const auto flag_call = [&] {
        return deps_.charges.FlagForReview(charge.id, charge.status, reason, traceparent);
      };
      const auto done = co_await db::WithDbRetries(flag_call);
      if (!done) {
        ++summary.errors;
        log::WithTrace(trace_id, spdlog::level::err, "charge {}: flagging for review failed: {}", charge.public_id(),
                       done.error().detail);
      } else if (done->has_value()) {
        discrepancy.flagged = true;
        ++summary.needs_review;
        log::WithTrace(trace_id, spdlog::level::warn, "charge {} ({}) flagged for review: {}", charge.public_id(),
                       charges::ToString(charge.status), reason);
      }
      co_return;
    }
  }
}

}  // namespace charge_outbox::reconciler
