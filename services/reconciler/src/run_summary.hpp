// RunSummary: what one reconciler run did, counted as it goes, and the one JSON line it logs at the end
// (the same figures the probe pushes to the Pushgateway).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

#include "charge_outbox/charges/charge.hpp"

namespace charge_outbox::reconciler {

// The reconciler's name on record: acquirer_attempts.actor of every call it makes.
inline constexpr const char* kActor = "reconciler";

enum class RunMode { kSweep, kWindow };
std::string_view ToString(RunMode mode);

// Not thread-safe: a run counts from its one I/O thread.
struct RunSummary {
  RunMode mode = RunMode::kSweep;
  std::int64_t examined = 0;          // charges looked at (sweep: claimed and worked on; window: compared)
  std::int64_t captured = 0;          // resolved by this run, by outcome
  std::int64_t failed = 0;
  std::int64_t canceled = 0;
  std::int64_t needs_review = 0;      // sweep: moved out of pending; window: flagged
  std::int64_t still_pending = 0;     // looked at and left pending (looked at again later)
  std::int64_t already_resolved = 0;  // resolved by someone else (charge-api) between claim and transition
  std::int64_t errors = 0;            // checks that got no usable answer, database failures, refused requests
  std::chrono::milliseconds duration{0};
  // Window reports only: discrepancies found, by kind.
  std::map<std::string, std::int64_t> discrepancies;

  void CountResolved(charges::ChargeStatus status);
  bool ok() const { return errors == 0; }
};

// {"ts":"...","level":"info","component":"reconciler","msg":"run summary","mode":"sweep","examined":3,...}
// with level "error" when the run had errors. Ends with a newline.
std::string SummaryLine(const RunSummary& summary, std::chrono::system_clock::time_point now);

}  // namespace charge_outbox::reconciler
