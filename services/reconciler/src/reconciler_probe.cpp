#include "reconciler_probe.hpp"

#include "pushgateway.hpp"

namespace charge_outbox::reconciler {
namespace {

double Seconds(std::chrono::system_clock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

}  // namespace

ReconcilerProbe::ReconcilerProbe()
    : registry_(metrics::NewRegistry()) {}

void ReconcilerProbe::Record(const RunSummary& s, std::chrono::system_clock::time_point started_at,
                             std::chrono::system_clock::time_point finished_at) {
  // No `mode` label on the metrics themselves: the Pushgateway's grouping key adds it to each.
  auto gauge = [&](const std::string& name, const std::string& help, double value) {
    metrics::Gauge(*registry_, name, help).Set(value);
  };
  auto d = [](std::int64_t v) { return static_cast<double>(v); };
  gauge("reconciler_last_run_examined_charges", "Charges the last run looked at", d(s.examined));
  auto& resolved =
      metrics::GaugeFamily(*registry_, "reconciler_last_run_resolved_charges",
                           "Charges the last run moved out of pending (a window report: flagged for review)");
  resolved.Add({{"outcome", "captured"}}).Set(d(s.captured));
  resolved.Add({{"outcome", "failed"}}).Set(d(s.failed));
  resolved.Add({{"outcome", "canceled"}}).Set(d(s.canceled));
  resolved.Add({{"outcome", "needs_review"}}).Set(d(s.needs_review));
  gauge("reconciler_last_run_still_pending_charges", "Charges the last run looked at and left pending",
        d(s.still_pending));
  gauge("reconciler_last_run_already_resolved_charges",
        "Charges resolved by someone else while the last run worked on them", d(s.already_resolved));
  gauge("reconciler_last_run_errors", "Errors in the last run: no usable acquirer answer, database failures",
        d(s.errors));
  gauge("reconciler_last_run_duration_seconds", "How long the last run took",
        std::chrono::duration<double>(s.duration).count());
  gauge("reconciler_last_run_timestamp_seconds", "When the last run finished", Seconds(finished_at));
  if (s.mode == RunMode::kWindow) {
    auto& family = metrics::GaugeFamily(*registry_, "reconciler_last_run_discrepancies",
                                        "Discrepancies the last window report found");
    for (const auto& [kind, count] : s.discrepancies) family.Add({{"kind", kind}}).Set(d(count));
  }
  // Each kind of run pushes only its own pair; POST leaves the other pair in place. So the series always
  // say when the last clean run was, and a run with errors stays on record, whichever of two runs beside
  // each other pushed last, until a clean run that started after it.
  if (s.ok()) {
    gauge("reconciler_last_success_timestamp_seconds", "When the last run without errors finished",
          Seconds(finished_at));
    gauge("reconciler_last_success_started_timestamp_seconds", "When the last run without errors started",
          Seconds(started_at));
  } else {
    gauge("reconciler_last_failure_timestamp_seconds", "When the last run with errors finished", Seconds(finished_at));
    gauge("reconciler_last_failure_errors", "Errors of the last run with errors", d(s.errors));
  }
}

int ReconcilerProbe::Push(const PushgatewayOptions& options, RunMode mode) {
  return PushToGateway(options, mode, registry_);
}

}  // namespace charge_outbox::reconciler
