// Issue 41, defect 10: two reconciler runs of one mode push to one Pushgateway group (an operator's manual
// Job beside the schedule). The group is modelled as the gateway keeps it under POST: each push replaces
// the metrics whose names it carries and leaves the rest. A run with errors must stay visible until a clean
// run that started after it, whichever of two runs beside each other pushes last.
#include "reconciler_probe.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace charge_outbox::reconciler {
namespace {

using namespace std::chrono_literals;
using Group = std::map<std::string, double>;  // metric name (unlabelled series) -> value

// What POST does to a group: every family this push carries replaces the group's family of that name.
void Post(Group& group, ReconcilerProbe& probe) {
  for (const auto& family : probe.registry().Collect()) {
    for (auto it = group.begin(); it != group.end();) it = it->first == family.name ? group.erase(it) : std::next(it);
    for (const auto& metric : family.metric) {
      if (metric.label.empty()) group[family.name] = metric.gauge.value;
    }
  }
}

// ChargeOutboxReconcilerRunFailed (helm/charge-outbox/templates/prometheusrule.yaml), over one group.
bool RunFailedAlertFires(const Group& group) {
  const auto failure = group.find("reconciler_last_failure_timestamp_seconds");
  if (failure == group.end()) return false;
  const auto success = group.find("reconciler_last_success_started_timestamp_seconds");
  return success == group.end() || failure->second > success->second;
}

RunSummary Clean() { return RunSummary{}; }
RunSummary WithErrors(int errors) {
  RunSummary s;
  s.errors = errors;
  return s;
}

const auto t0 = std::chrono::system_clock::time_point{std::chrono::seconds{1'800'000'000}};

TEST(ReconcilerProbe, AFailingRunStaysVisibleWhenACleanRunBesideItPushesLast) {
  Group group;
  ReconcilerProbe failing;
  failing.Record(WithErrors(2), t0 + 1s, t0 + 3s);
  Post(group, failing);
  EXPECT_TRUE(RunFailedAlertFires(group));

  // The scheduled run began before the failure and ends clean after it: it proves nothing about what the
  // failing run could not do.
  ReconcilerProbe beside;
  beside.Record(Clean(), t0, t0 + 5s);
  Post(group, beside);
  EXPECT_EQ(group["reconciler_last_run_errors"], 0);  // the last-run gauges say only who pushed last
  EXPECT_TRUE(RunFailedAlertFires(group));
  EXPECT_EQ(group["reconciler_last_failure_errors"], 2);

  // A clean run that started after the failure clears it.
  ReconcilerProbe later;
  later.Record(Clean(), t0 + 6s, t0 + 7s);
  Post(group, later);
  EXPECT_FALSE(RunFailedAlertFires(group));
  EXPECT_EQ(group["reconciler_last_success_timestamp_seconds"], 1'800'000'007.0);
}

TEST(ReconcilerProbe, ACleanRunPushesNoFailureAndAFailingRunNoSuccess) {
  Group group;
  ReconcilerProbe clean;
  clean.Record(Clean(), t0, t0 + 1s);
  Post(group, clean);
  EXPECT_FALSE(RunFailedAlertFires(group));
  EXPECT_FALSE(group.contains("reconciler_last_failure_timestamp_seconds"));
  ReconcilerProbe failing;
  failing.Record(WithErrors(1), t0 + 2s, t0 + 3s);
  Post(group, failing);
  EXPECT_EQ(group["reconciler_last_success_timestamp_seconds"], 1'800'000'001.0);  // left in place by POST
  EXPECT_TRUE(RunFailedAlertFires(group));
}

}  // namespace
}  // namespace charge_outbox::reconciler
