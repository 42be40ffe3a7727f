// PendingSweep: one run's pass over the pending charges older than the grace period (the safety net of
// docs/background.md, "A capture without a record"). It claims due charges in batches (a lease, see
// ReconciliationStore), asks the acquirer about each by its idempotency key, decides with the table in
// decision.hpp, and applies the decision: a transition through charges::Settle (the same conditional update
// charge-api uses, so exactly one of them wins a race, and a proof that loses to a contradicting state goes
// to review), or a later look. Every acquirer call is recorded as an attempt with actor "reconciler" before
// it is sent.
//
// Within a run, up to `concurrency` charges are worked on at once, all on the caller's executor (one I/O
// thread is plenty: the database calls run on the pool's threads and the acquirer calls are async).
// When the time budget runs out, no new charge is started, the ones in progress finish, and the claims
// left unstarted are given back for the next run.
//
// Lifecycle: construct, Run() once. Not thread-safe; the dependencies must outlive it.
#pragma once

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "charge_outbox/acquirer/acquirer_client.hpp"
#include "charge_outbox/acquirer/retry_policy.hpp"
#include "charge_outbox/charges/charge_store.hpp"
#include "charge_outbox/charges/reconciliation_store.hpp"
#include "charge_outbox/charges/attempt_recorder.hpp"
#include "reconciler_config.hpp"
#include "run_summary.hpp"

namespace charge_outbox::reconciler {

struct SweepDependencies {
  charges::ChargeStore& charges;
  charges::ReconciliationStore& store;
  acquirer::AcquirerClient& acquirer;
  const acquirer::RetryPolicy& policy;
  util::Clock& clock;
  util::RandomSource& random;  // jitter of the next check
};

class PendingSweep {
 public:
  // `owner_id` is this run's lease owner: unique per run, so a run only ever gives back its own claims.
  PendingSweep(SweepDependencies deps, SweepOptions options, std::string owner_id);

  boost::asio::awaitable<RunSummary> Run();
  // Stops the run early (SIGTERM): no new charge is started; call on the executor Run() runs on.
  void RequestStop() { stop_requested_ = true; }

 private:
  using SteadyTime = std::chrono::steady_clock::time_point;

  boost::asio::awaitable<void> ProcessBatch(std::vector<charges::ClaimedCharge>& batch, SteadyTime claimed_at,
                                            SteadyTime budget_end, RunSummary& summary);
  boost::asio::awaitable<void> Work(std::vector<charges::ClaimedCharge>& batch, std::size_t& next,
                                    SteadyTime claimed_at, SteadyTime budget_end, RunSummary& summary);
  // `claimed_at` (the monotonic clock) dates the charge's row, whose age the database measured.
  boost::asio::awaitable<void> Check(const charges::ClaimedCharge& claimed, SteadyTime claimed_at,
                                     RunSummary& summary);
  boost::asio::awaitable<void> Apply(const charges::ClaimedCharge& claimed, SteadyTime claimed_at,
                                     const Decision& decision, charges::AttemptRecorder& log, RunSummary& summary);
  boost::asio::awaitable<void> Resubmit(const charges::ClaimedCharge& claimed, SteadyTime claimed_at,
                                        RunSummary& summary);
  boost::asio::awaitable<void> Void(const charges::ClaimedCharge& claimed, SteadyTime claimed_at,
                                    const std::string& capture_id, RunSummary& summary);
  // The charge's age now: the database's reading at the claim plus this run's monotonic time since.
  std::chrono::milliseconds Age(const charges::Charge& charge, SteadyTime claimed_at);
  // True (and counted) when the store refused to record an attempt of `log`'s run: nothing was sent.
  static bool Refused(const charges::ClaimedCharge& claimed, const charges::AttemptRecorder& log,
                      RunSummary& summary);
  // False (and counted) when the claim is gone or cannot be renewed: the charge must be left alone.
  boost::asio::awaitable<bool> Renew(const charges::Charge& charge, RunSummary& summary);
  // The charge's attempts on record; nullopt (logged, counted as an error) when the database did not answer.
  boost::asio::awaitable<std::optional<charges::AttemptHistory>> ReadHistory(const charges::Charge& charge,
                                                                             RunSummary& summary);

  bool OutOfTime(SteadyTime budget_end) const { return stop_requested_ || deps_.clock.SteadyNow() >= budget_end; }

  SweepDependencies deps_;
  SweepOptions options_;
  std::string owner_id_;
  bool stop_requested_ = false;
};

}  // namespace charge_outbox::reconciler
