// ReconcilerProbe: the reconciler's metrics. A run is a process that exits, so nothing scrapes it: the
// figures of the run are set once at the end and pushed to a Prometheus Pushgateway when one is
// configured, grouped by job and mode (`/metrics/job/reconciler/mode/sweep`), so a window report never
// overwrites the sweep's figures; the gateway adds `job` and `mode` to every series.
//
//   reconciler_last_run_examined_charges
//   reconciler_last_run_resolved_charges{outcome="captured|failed|canceled|needs_review"}
//   reconciler_last_run_still_pending_charges
//   reconciler_last_run_already_resolved_charges
//   reconciler_last_run_errors
//   reconciler_last_run_duration_seconds
//   reconciler_last_run_timestamp_seconds
//   reconciler_last_success_timestamp_seconds          only pushed by runs without errors: when it finished
//   reconciler_last_success_started_timestamp_seconds  ... and when it started
//   reconciler_last_failure_timestamp_seconds          only pushed by runs with errors: when it finished
//   reconciler_last_failure_errors                     ... and how many errors it had
//   reconciler_last_run_discrepancies{kind}            window reports
//
// Two runs may push to one group (an operator's `kubectl create job --from=cronjob/...` beside the
// schedule), and the last to push sets the reconciler_last_run_* gauges, so a run with errors can be
// overwritten by a clean one that ran beside it. The failure and success gauges are each pushed only by
// their kind of run, and POST leaves the other kind's in place: a failure stays visible until a run that
// started after it succeeds (failure timestamp > success started timestamp). Alert on that, and on
// time() - reconciler_last_success_timestamp_seconds (runs that stop happening). Not thread-safe: used
// once, at the end of a run.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "charge_outbox/metrics/metrics.hpp"
#include "reconciler_config.hpp"
#include "run_summary.hpp"

namespace charge_outbox::reconciler {

class ReconcilerProbe {
 public:
  ReconcilerProbe();

  // Sets every gauge from the summary of a run that started at `started_at`.
  void Record(const RunSummary& summary, std::chrono::system_clock::time_point started_at,
              std::chrono::system_clock::time_point finished_at);
  // PushToGateway with this run's metrics.
  int Push(const PushgatewayOptions& options, RunMode mode);

  metrics::Registry& registry() { return *registry_; }

 private:
  std::shared_ptr<metrics::Registry> registry_;
};

}  // namespace charge_outbox::reconciler
