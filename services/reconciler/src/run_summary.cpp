#include "run_summary.hpp"

#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include "charge_outbox/util/time.hpp"

namespace charge_outbox::reconciler {

std::string_view ToString(RunMode mode) {
  switch (mode) {
    case RunMode::kSweep: return "sweep";
    case RunMode::kWindow: return "window";
  }
  return "?";
}

void RunSummary::CountResolved(charges::ChargeStatus status) {
  switch (status) {
    case charges::ChargeStatus::kCaptured: ++captured; return;
    case charges::ChargeStatus::kFailed: ++failed; return;
    case charges::ChargeStatus::kCanceled: ++canceled; return;
    case charges::ChargeStatus::kNeedsReview: ++needs_review; return;
    case charges::ChargeStatus::kPending: ++still_pending; return;
  }
}

std::string SummaryLine(const RunSummary& s, std::chrono::system_clock::time_point now) {
  // The members of a log line first, in the log's order, so the line reads like every other one.
  boost::json::object line{{"ts", util::FormatRfc3339(now)},
                           {"level", s.ok() ? "info" : "error"},
                           {"component", "reconciler"},
                           {"msg", "run summary"},
                           {"mode", ToString(s.mode)},
                           {"examined", s.examined},
                           {"captured", s.captured},
                           {"failed", s.failed},
                           {"canceled", s.canceled},
                           {"needs_review", s.needs_review},
                           {"still_pending", s.still_pending},
                           {"already_resolved", s.already_resolved},
                           {"errors", s.errors},
                           {"duration_ms", s.duration.count()}};
  if (s.mode == RunMode::kWindow) {
    boost::json::object discrepancies;
    for (const auto& [kind, count] : s.discrepancies) discrepancies.emplace(kind, count);
    line.emplace("discrepancies", std::move(discrepancies));
  }
  return boost::json::serialize(line) + "\n";
}

}  // namespace charge_outbox::reconciler
