// WindowReconciliation: `reconciler window --from T --to T`. Lists every capture the acquirer made in
// [from, to), page by page, and compares each page with our charges as it comes (window_compare.hpp: one
// query for the charges a page names), then asks by key about each of our captured charges the listing did
// not show; flags every charge with a discrepancy `needs_review` (with its event), keeps every capture
// without a charge of ours for a person (orphan_captures). It changes nothing else: a discrepancy is for a
// human to settle (docs/background.md, "Repair by new operations": never force a state, never create another
// charge to fix one).
//
// The report is lines, written as the run goes (ReportSink): one per discrepancy (and so per capture
// without a charge of ours) when it is found, one per charge whose lookup got no answer, and a last line
// with the counts. Memory is bounded by design: the listing is never held whole, only a few dozen bytes per
// charge of ours it named, the ids of our captured charges in the window, and the discrepancies until they
// are acted on; and `max_captures` caps the window.
//
// A listing that could not be read to its end, or a window with more than `max_captures` captures on
// either side, is reported incomplete and flags nothing: "absent from a partial listing" proves nothing,
// so nothing is acted on until the whole window has been compared (lines already written stand: each says
// what one listed capture shows). Nor does a window that has not settled (it closed less than a
// visibility window ago) flag anything, and our side holds only charges recorded captured at least a
// visibility window ago: a capture the acquirer made a moment ago is not yet in its lookups.
//
// Lifecycle: construct, Run() once. Not thread-safe; the dependencies must outlive it.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "charge_outbox/acquirer/acquirer_client.hpp"
#include "charge_outbox/acquirer/retry_policy.hpp"
#include "charge_outbox/charges/charge_store.hpp"
#include "charge_outbox/charges/orphan_capture_store.hpp"
#include "charge_outbox/charges/reconciliation_store.hpp"
#include "run_summary.hpp"
#include "window_compare.hpp"

namespace charge_outbox::reconciler {

// Where the report's lines go, each a whole JSON line with its newline (stdout, or the --output file).
using ReportSink = std::function<void(const std::string& line)>;

struct WindowDependencies {
  charges::ChargeStore& charges;
  charges::ReconciliationStore& store;
  charges::OrphanCaptureStore& orphans;  // where a capture without a charge of ours is kept for a person
  acquirer::AcquirerClient& acquirer;
  const acquirer::RetryPolicy& policy;
  util::Clock& clock;
  const ReportSink& report;
};

struct WindowOptions {
  int page_limit = 100;
  // How long after its creation a charge may still be captured: the business deadline plus the claim
  // lease (work in progress at the deadline). Bounds which of our charges can belong to the window.
  std::chrono::milliseconds capture_horizon{std::chrono::hours{1}};
  // How long a capture may stay invisible at the acquirer: a window that closed less than this ago is
  // reported `"settled": false` and flags nothing (a capture missing from it may still appear).
  std::chrono::milliseconds visibility_window{std::chrono::minutes{5}};
  // reconciler.window.max_captures: past this many captures in the listing (or captured charges of ours in
  // the window), the run stops judging: incomplete, nothing flagged.
  std::int64_t max_captures = 1'000'000;
};

struct WindowResult {
  RunSummary summary;
  boost::json::object report;  // the last line's counts (without ts, level, component, msg)
};

class WindowReconciliation {
 public:
  WindowReconciliation(WindowDependencies deps, WindowOptions options);

  boost::asio::awaitable<WindowResult> Run(std::chrono::system_clock::time_point from,
                                           std::chrono::system_clock::time_point to);

 private:
  // Each returns whether it acted (the charge moved to needs_review; the capture recorded, in any status).
  boost::asio::awaitable<bool> Flag(const Discrepancy& discrepancy, RunSummary& summary);
  boost::asio::awaitable<bool> Keep(const Discrepancy& orphan, std::chrono::system_clock::time_point from,
                                    std::chrono::system_clock::time_point to, RunSummary& summary);
  // The discrepancy's line, written now; returns what acting on it later needs (one side only).
  Discrepancy Report(Discrepancy discrepancy, RunSummary& summary);
  void Line(std::string_view level, std::string_view msg, boost::json::object fields, std::string_view trace_id = {});

  WindowDependencies deps_;
  WindowOptions options_;
};

}  // namespace charge_outbox::reconciler
