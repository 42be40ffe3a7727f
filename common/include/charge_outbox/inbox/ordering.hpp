// Per-charge ordering: which of one charge's events to apply now, which to hold for a missing
// predecessor, which are duplicates. Pure: the inbox store reads where the charge stands and what is
// held, asks PlanCharge, and writes the plan in the same transaction as the handler's effects.
//
// Rules (docs/inbox.md): the next event applied is last + 1. An event at or below `last` was applied
// already. One past a gap (last + 2 or more) is held; held events wait for the missing ones and, under
// the `apply` policy, are applied past the gap once they have waited `wait` (the gap is recorded); under
// `hold` they wait until a person decides.
#pragma once

#include <chrono>
#include <optional>
#include <vector>

#include "charge_outbox/inbox/charge_event.hpp"

namespace charge_outbox::inbox {

enum class GapPolicy {
  kApply,  // after `wait`, apply the event past the gap and record the gap
  kHold,   // never apply past a gap: the held gauge calls a person
};

struct GapOptions {
  GapPolicy policy = GapPolicy::kApply;
  std::chrono::milliseconds wait{std::chrono::seconds{30}};
};

// One of the charge's events: arrived in this batch, or held earlier (`held_since` set).
struct Candidate {
  const ChargeEvent* event = nullptr;
  std::optional<std::chrono::system_clock::time_point> held_since;
};

struct Step {
  const ChargeEvent* event = nullptr;
  int gap_before = 0;     // events missing just before this one (0: it was the next one)
  bool was_held = false;  // it leaves the held set
};

struct ChargePlan {
  std::vector<Step> apply;                     // in sequence order
  std::vector<const ChargeEvent*> hold;        // arrived now, to be held (already held ones stay held)
  std::vector<const ChargeEvent*> duplicates;  // arrived now, already applied or held: no effect
  std::vector<const ChargeEvent*> drop_held;   // held, but the charge has moved past them: forget them
  int last_sequence = 0;                       // where the charge stands after `apply`
};

// `candidates` in arrival order (held ones first). Every event must be of this one charge.
ChargePlan PlanCharge(int last_sequence, const std::vector<Candidate>& candidates,
                      std::chrono::system_clock::time_point now, const GapOptions& gaps);

}  // namespace charge_outbox::inbox
