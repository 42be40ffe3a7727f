#include "window_reconciliation.hpp"

#include <spdlog/spdlog.h>

#include <boost/json/serialize.hpp>

#include <algorithm>
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
    case acquirer::ListEnd::kStopped: return "stopped";
  }
  return "?";
}

}  // namespace

WindowReconciliation::WindowReconciliation(WindowDependencies deps, WindowOptions options)
    : deps_(deps), options_(options) {}

void WindowReconciliation::Line(std::string_view level, std::string_view msg, json::object fields,
                                std::string_view trace_id) {
  // The members of a log line first, in the log's order, so the line reads like every other one.
  json::object line{{"ts", util::FormatRfc3339(deps_.clock.WallNow())}, {"level", level}, {"component", "reconciler"}};
  if (!trace_id.empty()) line["trace_id"] = trace_id;
  line["msg"] = msg;
  for (auto& member : fields) line[member.key()] = std::move(member.value());
  deps_.report(json::serialize(line) + "\n");
}

Discrepancy WindowReconciliation::Report(Discrepancy d, RunSummary& summary) {
  ++summary.discrepancies[std::string(ToString(d.kind))];
  const auto trace_id = d.charge ? log::TraceIdOf(d.charge->traceparent) : std::string();
  Line("warn", "window discrepancy", DiscrepancyJson(d), trace_id);
  // Kept until the window is whole: a capture without a charge of ours is recorded from its capture, a
  // charge is flagged from the charge, so the other side goes now.
  if (d.kind == DiscrepancyKind::kCaptureWithoutLocalRecord) {
    d.charge.reset();
  } else {
    d.capture.reset();
    d.fields.clear();
  }
  return d;
}

asio::awaitable<WindowResult> WindowReconciliation::Run(std::chrono::system_clock::time_point from,
                                                         std::chrono::system_clock::time_point to) {
  WindowResult result;
  auto& summary = result.summary;
  auto& report = result.report;
  summary.mode = RunMode::kWindow;
  const auto started = deps_.clock.SteadyNow();
  const auto max = options_.max_captures;
  WindowComparer comparer;
  std::vector<Discrepancy> to_act;  // acted on once the whole window is compared
  std::int64_t listed = 0;
  std::int64_t ours_in_window = 0;
  int confirmed_outside = 0;
  std::int64_t unverified = 0;
  std::int64_t orphans_recorded = 0;

  const bool settled = to + options_.visibility_window <= deps_.clock.WallNow();
  report["window"] = json::object{{"from", util::FormatRfc3339(from)}, {"to", util::FormatRfc3339(to)}};
  report["settled"] = settled;
  report["max_captures"] = max;
  auto finish = [&](std::string_view incomplete) {
    summary.duration = std::chrono::duration_cast<std::chrono::milliseconds>(deps_.clock.SteadyNow() - started);
    report["complete"] = incomplete.empty();
    if (!incomplete.empty()) report["listing_end"] = incomplete;
    report["local"] = json::object{{"captured_in_window", ours_in_window}, {"referenced", comparer.referenced()}};
    report["matched"] = comparer.matched();
    report["confirmed_outside_window"] = confirmed_outside;
    report["pending_with_capture"] = comparer.pending_with_capture();
    json::object counts;
    for (const auto& [kind, count] : summary.discrepancies) counts.emplace(kind, count);
    report["discrepancies"] = std::move(counts);
    report["unverified"] = unverified;
    report["flagged"] = summary.needs_review;
    report["orphans_recorded"] = orphans_recorded;
    report["errors"] = summary.errors;
    Line(summary.ok() ? "info" : "error", "window report", report);
  };
  const auto over_cap = [&](std::string_view side, std::int64_t count) {
    ++summary.errors;
    spdlog::error("the window holds more than reconciler.window.max_captures ({}) {} (at least {}): it was not "
                  "compared to its end and nothing is flagged; raise reconciler.window.max_captures (and the "
                  "job's memory with it) or split the window with --from/--to",
                  max, side, count);
  };

  // The acquirer's side, a page at a time: our charges each page names in one query, compared at once.
  bool charges_unread = false;
  const acquirer::ListWindow window{from, to, options_.page_limit};
  const auto listing = co_await acquirer::VisitWindowPages(
      deps_.acquirer, window, deps_.policy, deps_.clock,
      [&](std::vector<acquirer::Capture> page) -> asio::awaitable<bool> {
        listed += static_cast<std::int64_t>(page.size());
        if (listed > max) co_return false;
        std::set<std::string> ids;
        for (const auto& capture : page) {
          if (const auto uuid = charges::UuidFromPublicId(capture.reference)) ids.insert(*uuid);
        }
        std::vector<charges::Charge> referenced;
        std::vector<std::string> chunk;
        for (auto it = ids.begin(); it != ids.end();) {
          chunk.push_back(*it++);
          if (chunk.size() < kIdsPerRead && it != ids.end()) continue;
          const auto read_call = [&] { return deps_.store.FindByIds(chunk); };
          auto found = co_await db::WithDbRetries(read_call);
          chunk.clear();
          if (!found) {
            spdlog::error("reading our charges failed: {}", found.error().detail);
            charges_unread = true;
            co_return false;
          }
          for (auto& c : *found) referenced.push_back(std::move(c));
        }
        for (auto& d : comparer.ComparePage(page, referenced)) to_act.push_back(Report(std::move(d), summary));
        co_return true;
      });
  report["acquirer"] = json::object{{"captures", listed}, {"pages", listing.pages}};
  if (charges_unread) {
    ++summary.errors;
    finish("database_failed");
    co_return result;
  }
  if (listed > max) {
    over_cap("captures in the acquirer's listing", listed);
    finish("max_captures_exceeded");
    co_return result;
  }
  if (listing.end != acquirer::ListEnd::kComplete) {
    ++summary.errors;
    if (listing.failed_page) report["listing_error"] = listing.failed_page->last().detail;
    spdlog::error("the acquirer's listing could not be read to its end ({}): nothing flagged", ToString(listing.end));
    finish(ToString(listing.end));
    co_return result;
  }
  for (auto& d : comparer.Finish()) to_act.push_back(Report(std::move(d), summary));

  // Ours: the captured charges whose capture may lie in the window, by id only; those the listing did not
  // name are read whole and asked about by key.
  const auto created_after = from - options_.capture_horizon;
  const auto window_call = [&] {
    return deps_.store.FindCapturedIdsInWindow(from, to, created_after, options_.visibility_window);
  };
  auto captured = co_await db::WithDbRetries(window_call);
  if (!captured) {
    ++summary.errors;
    spdlog::error("reading our captured charges failed: {}", captured.error().detail);
    finish("database_failed");
    co_return result;
  }
  ours_in_window = static_cast<std::int64_t>(captured->size());
  if (ours_in_window > max) {
    over_cap("captured charges of ours", ours_in_window);
    finish("max_captures_exceeded");
    co_return result;
  }
  std::vector<std::string> unlisted;
  for (auto& id : *captured) {
    if (!comparer.Listed(id)) unlisted.push_back(std::move(id));
  }
  captured->clear();
  captured->shrink_to_fit();

  // Each unlisted charge: its capture may lie just outside the window (found and agrees); a missing one is
  // a discrepancy; no answer leaves it unverified (an error).
  for (std::size_t at = 0; at < unlisted.size(); at += kIdsPerRead) {
    std::vector<std::string> chunk(unlisted.begin() + static_cast<std::ptrdiff_t>(at),
                                   unlisted.begin() + static_cast<std::ptrdiff_t>(std::min(unlisted.size(), at + kIdsPerRead)));
    const auto read_call = [&] { return deps_.store.FindByIds(chunk); };
    const auto charges_read = co_await db::WithDbRetries(read_call);
    if (!charges_read) {
      ++summary.errors;
      spdlog::error("reading our charges failed: {}", charges_read.error().detail);
      finish("database_failed");
      co_return result;
    }
    for (const auto& charge : *charges_read) {
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
            to_act.push_back(Report({DiscrepancyKind::kMismatch, last.capture, charge, std::move(fields)}, summary));
          }
          break;
        }
        case OutcomeKind::kNotFound:
          to_act.push_back(Report({DiscrepancyKind::kMissingAtAcquirer, std::nullopt, charge, {}}, summary));
          break;
        case OutcomeKind::kDeclined:
        case OutcomeKind::kVoided:
        case OutcomeKind::kPage:
        case OutcomeKind::kNotSent:
        case OutcomeKind::kTimedOut:
        case OutcomeKind::kConnectionDropped:
        case OutcomeKind::kServerError:
        case OutcomeKind::kStoredError:
        case OutcomeKind::kUnavailable:
        case OutcomeKind::kThrottled:
        case OutcomeKind::kInFlight:
        case OutcomeKind::kUntrustedResponse:
        case OutcomeKind::kContractError:
          ++summary.errors;
          ++unverified;
          Line("error", "window unverified",
               json::object{{"charge_id", charge.public_id()}, {"outcome", acquirer::ToString(last.kind)}},
               log::TraceIdOf(charge.traceparent));
          break;
      }
    }
  }
  summary.examined = listed + static_cast<std::int64_t>(unlisted.size());

  // The whole window is compared: act, on a settled window only.
  if (settled) {
    for (const auto& d : to_act) {
      if (d.kind == DiscrepancyKind::kCaptureWithoutLocalRecord) {
        if (co_await Keep(d, from, to, summary)) ++orphans_recorded;
      } else {
        co_await Flag(d, summary);
      }
    }
  } else if (!to_act.empty()) {
    spdlog::warn("{} discrepancy(ies) in a window that closed less than {} s ago: reported, none flagged; a report "
                 "after the window settles decides",
                 to_act.size(), options_.visibility_window.count() / 1000);
  }
  finish("");
  co_return result;
}

// A capture without a charge of ours has nothing of ours to flag: it is kept for a person, who voids or
// adopts it with charge-admin (docs/operations.md). Only on a settled window, like a flag.
asio::awaitable<bool> WindowReconciliation::Keep(const Discrepancy& orphan,
                                                 std::chrono::system_clock::time_point from,
                                                 std::chrono::system_clock::time_point to, RunSummary& summary) {
  const auto& capture = *orphan.capture;
  const auto record_call = [&] { return deps_.orphans.Record(capture, from, to); };
  const auto recorded = co_await db::WithDbRetries(record_call);
  if (!recorded) {
    ++summary.errors;
    spdlog::error("capture {} ({} {}, reference {}) has no charge of ours, and keeping it for a person failed: {}",
                  capture.id, capture.amount, capture.currency, capture.reference.substr(0, 80),
                  recorded.error().detail);
    co_return false;
  }
  if (*recorded == charges::OrphanStatus::kOpen) {
    spdlog::warn("capture {} ({} {}, reference {}) has no charge of ours: kept for a person (charge-admin orphan "
                 "show {})",
                 capture.id, capture.amount, capture.currency, capture.reference.substr(0, 80), capture.id);
  }
  co_return true;
}

asio::awaitable<bool> WindowReconciliation::Flag(const Discrepancy& discrepancy, RunSummary& summary) {
  if (!discrepancy.charge) co_return false;  // a capture without a charge: Keep's
  const auto& charge = *discrepancy.charge;
  const std::string reason = "window_" + std::string(ToString(discrepancy.kind));
  const auto parent = trace::ParseTraceparent(charge.traceparent);
  const auto traceparent = (parent ? trace::ChildOf(*parent) : trace::NewTrace()).ToTraceparent();
  const auto trace_id = log::TraceIdOf(traceparent);  // what the lines about the charge carry
  switch (charge.status) {
    case ChargeStatus::kNeedsReview: co_return false;  // already with a human
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
        ++summary.needs_review;
        log::WithTrace(trace_id, spdlog::level::warn, "charge {} (pending) flagged for review: {}", charge.public_id(),
                       reason);
        co_return true;
      }
      co_return false;
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
        ++summary.needs_review;
        log::WithTrace(trace_id, spdlog::level::warn, "charge {} ({}) flagged for review: {}", charge.public_id(),
                       charges::ToString(charge.status), reason);
        co_return true;
      }
      co_return false;
    }
  }
  co_return false;
}

}  // namespace charge_outbox::reconciler
