#include "run_summary.hpp"

#include "charge_outbox/log/log.hpp"
#include "charge_outbox/util/time.hpp"

namespace charge_outbox::reconciler {
namespace {

void Field(std::string& out, std::string_view name, std::int64_t value) {
  out += ",\"";
  out += name;
  out += "\":";
  out += std::to_string(value);
}

}  // namespace

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
  std::string line = R"({"ts":")" + util::FormatRfc3339(now) + R"(","level":")" + (s.ok() ? "info" : "error") +
                     R"(","component":"reconciler","msg":"run summary","mode":")" + std::string(ToString(s.mode)) +
                     '"';
  Field(line, "examined", s.examined);
  Field(line, "captured", s.captured);
  Field(line, "failed", s.failed);
  Field(line, "canceled", s.canceled);
  Field(line, "needs_review", s.needs_review);
  Field(line, "still_pending", s.still_pending);
  Field(line, "already_resolved", s.already_resolved);
  Field(line, "errors", s.errors);
  Field(line, "duration_ms", s.duration.count());
  if (s.mode == RunMode::kWindow) {
    line += R"(,"discrepancies":{)";
    bool first = true;
    for (const auto& [kind, count] : s.discrepancies) {
      if (!first) line += ',';
      first = false;
      line += '"';
      log::AppendJsonEscaped(kind, line);
      line += "\":" + std::to_string(count);
    }
    line += '}';
  }
  line += "}\n";
  return line;
}

}  // namespace charge_outbox::reconciler
