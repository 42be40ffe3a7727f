#include "charge_outbox/inbox/ordering.hpp"

#include <algorithm>
#include <string>

namespace charge_outbox::inbox {

ChargePlan PlanCharge(int last_sequence, const std::vector<Candidate>& candidates,
                      std::chrono::system_clock::time_point now, const GapOptions& gaps) {
  ChargePlan plan;
  plan.last_sequence = last_sequence;

  // One candidate per sequence: the first seen (a held one before any that arrived now). A later one with
  // the same id or sequence is a re-delivery; so is anything at or below where the charge stands.
  // A charge has a handful of events: a linear look beats building sets.
  std::vector<Candidate> fresh;
  fresh.reserve(candidates.size());
  for (const auto& c : candidates) {
    const auto& e = *c.event;
    const bool seen = std::any_of(fresh.begin(), fresh.end(), [&](const Candidate& f) {
      return f.event->sequence == e.sequence || f.event->event_id == e.event_id;
    });
    if (seen || e.sequence <= last_sequence) {
      (c.held_since ? plan.drop_held : plan.duplicates).push_back(c.event);
      continue;
    }
    fresh.push_back(c);
  }
  std::sort(fresh.begin(), fresh.end(),
            [](const Candidate& a, const Candidate& b) { return a.event->sequence < b.event->sequence; });

  bool holding = false;
  for (const auto& c : fresh) {
    const int gap = c.event->sequence - plan.last_sequence - 1;
    if (!holding && gap > 0) {
      const auto since = c.held_since.value_or(now);
      holding = gaps.policy == GapPolicy::kHold || now - since < gaps.wait;
    }
    if (holding) {
      // Everything after the first event that must wait waits behind it, in order.
      if (!c.held_since) plan.hold.push_back(c.event);
      continue;
    }
    plan.apply.push_back({.event = c.event, .gap_before = gap, .was_held = c.held_since.has_value()});
    plan.last_sequence = c.event->sequence;
  }
  return plan;
}

}  // namespace charge_outbox::inbox
