// The checker: after the faults stop and the system settles, every invariant of the product held against
// ground truth, the acquirer's own ledger, and against what a real Kafka consumer reads back:
//
//   1. no acquirer idempotency key captured twice
//   2. every capture in the ledger belongs to a local charge that is `captured` (or `needs_review` with a
//      recorded reason, or `canceled` with the void that reversed it)
//   3. no local `captured` without a live ledger capture of the same id, amount and currency
//   4. no charge left `pending`
//   5. every final answer a client received is the truth by the ledger: captured ⇒ a live capture there;
//      failed or canceled ⇒ no live capture there
//   6. exactly one terminal outbox event per terminal charge (a later needs_review only when the acquirer
//      contradicted it), the last one announcing the state the charge is in
//   7. every outbox event read back from Kafka, each charge's events in `sequence` order, a repeat only
//      as a re-delivery of the same ce_id
//   8. every event read back conforms to its schema and attributes
//   9. no order captured twice, though clients start an order over under a new key after a definitive
//      "no money" answer
//  10. every answer's words are true: a text that says no money was taken or nothing was charged, for a
//      key whose charge holds no live capture; "under review" for a charge that is in needs_review
//  11. no charge captured behind the back of a client that was only ever refused (503, 429) and walked away
//  12. every charge the window report flagged disagrees with the ledger (a flag on a charge the ledger
//      agrees with is a false alarm a person would chase)
//  13. no capture recorded after the acquirer voided it: a stale proof never lands over a void
//  14. every capture at the acquirer whose charge the database does not have (a commit a failover forgot)
//      is recorded by the window report run over the whole load (orphan_captures): none missed
//
// With asynchronous replication (CheckOptions::forgetting_allowed) a failover may forget commits a client
// was already answered. Violations of 2, 3, 5, 7, 10 and 11 on a charge such a loss touched (its capture
// has no local charge, a retry of the same key created it again, an event of it on the topic is no longer
// in the outbox, or a client was told about a charge that no longer exists), and answers given between the
// standby's falling behind and the kill (CheckOptions::forgetting_windows), are counted apart, as explained
// by a forgotten commit, and the loss is tabled; 14 still holds every such capture to the window report.
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "chaos_stack.hpp"
#include "chaos_workload.hpp"

namespace charge_outbox::chaos {

struct Invariant {
  std::string name;
  std::int64_t checked = 0;
  std::int64_t violations = 0;
  std::int64_t forgotten = 0;  // would have been violations, explained by a forgotten commit (async only)
  std::vector<std::string> examples;  // the first few

  void Violation(std::string example) {
    ++violations;
    if (examples.size() < 3) examples.push_back(std::move(example));
  }
};

struct Verdict {
  std::vector<Invariant> invariants;
  std::map<std::string, std::int64_t> charges_by_status;
  // What the database forgot, as the ledger, the clients and the topic show it (HA topology).
  std::map<std::string, std::int64_t> forgotten;
  std::int64_t redeliveries = 0;  // messages read back that repeat an event already read
  bool ok() const {
    for (const auto& i : invariants) {
      if (i.violations > 0) return false;
    }
    return !invariants.empty();
  }
};

// Waits (up to `settle_for`) for no pending charge and an empty outbox backlog, running the reconciler
// as often as it takes; returns false if the system did not settle.
bool Settle(ChaosStack& stack, std::chrono::seconds settle_for, std::ostream& log);

struct CheckOptions {
  // Asynchronous replication: commits a failover forgot explain some violations (counted apart).
  bool forgetting_allowed = false;
  // Invariant 14 (the window report has run over the whole load and recorded its orphans).
  bool window_report_ran = false;
  // When the database may have acknowledged commits it then forgot (from the standby falling behind to
  // the primary's kill, with some slack): a final answer a client received then is explained by the loss.
  std::vector<std::pair<std::chrono::steady_clock::time_point, std::chrono::steady_clock::time_point>>
      forgetting_windows;
};

Verdict Check(ChaosStack& stack, const std::vector<IntentOutcome>& outcomes, const CheckOptions& options,
              std::ostream& log);

}  // namespace charge_outbox::chaos
