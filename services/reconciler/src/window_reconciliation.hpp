// WindowReconciliation: `reconciler window --from T --to T`. Lists every capture the acquirer made in
// [from, to) (all pages), compares them with our charges (window_compare.hpp), confirms by key each of our
// captured charges the listing does not show, flags every charge with a discrepancy `needs_review` (with
// its event), keeps every capture without a charge of ours for a person (orphan_captures), and returns the
// report. It changes nothing else: a discrepancy is for a human to settle
// (docs/background.md, "Repair by new operations": never force a state, never create another charge to fix one).
//
// A listing that could not be read to its end is reported incomplete and flags nothing: "absent from a
// partial listing" proves nothing. Nor does a window that has not settled (it closed less than a
// visibility window ago) flag anything, and our side holds only charges recorded captured at least a
// visibility window ago: a capture the acquirer made a moment ago is not yet in its lookups.
//
// Lifecycle: construct, Run() once. Not thread-safe; the dependencies must outlive it.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>

#include <chrono>
#include <string>

#include "charge_outbox/acquirer/acquirer_client.hpp"
#include "charge_outbox/acquirer/retry_policy.hpp"
#include "charge_outbox/charges/charge_store.hpp"
#include "charge_outbox/charges/orphan_capture_store.hpp"
#include "charge_outbox/charges/reconciliation_store.hpp"
#include "run_summary.hpp"
#include "window_compare.hpp"

namespace charge_outbox::reconciler {

struct WindowDependencies {
  charges::ChargeStore& charges;
  charges::ReconciliationStore& store;
  charges::OrphanCaptureStore& orphans;  // where a capture without a charge of ours is kept for a person
  acquirer::AcquirerClient& acquirer;
  const acquirer::RetryPolicy& policy;
  util::Clock& clock;
};

struct WindowOptions {
  int page_limit = 100;
  // How long after its creation a charge may still be captured: the business deadline plus the claim
  // lease (work in progress at the deadline). Bounds which of our charges can belong to the window.
  std::chrono::milliseconds capture_horizon{std::chrono::hours{1}};
  // How long a capture may stay invisible at the acquirer: a window that closed less than this ago is
  // reported `"settled": false` and flags nothing (a capture missing from it may still appear).
  std::chrono::milliseconds visibility_window{std::chrono::minutes{5}};
};

struct WindowResult {
  RunSummary summary;
  boost::json::object report;
};

class WindowReconciliation {
 public:
  WindowReconciliation(WindowDependencies deps, WindowOptions options);

  boost::asio::awaitable<WindowResult> Run(std::chrono::system_clock::time_point from,
                                           std::chrono::system_clock::time_point to);

 private:
  boost::asio::awaitable<void> Flag(Discrepancy& discrepancy, RunSummary& summary);
  boost::asio::awaitable<void> Keep(Discrepancy& orphan, std::chrono::system_clock::time_point from,
                                    std::chrono::system_clock::time_point to, RunSummary& summary);

  WindowDependencies deps_;
  WindowOptions options_;
};

}  // namespace charge_outbox::reconciler
