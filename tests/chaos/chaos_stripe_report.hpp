// What a run against Stripe's dialect exercised, so that a pass shows its limits were met rather than
// avoided: acquirer-sim's requests by kind (searches, retrievals, events pages besides captures), the
// daemons' acquirer attempts by operation and outcome as the database recorded them (stored 500s, 429s,
// searches that found nothing), the most reconciler processes that searched at once against the budget
// the search rates were set for, and the POSTs that replayed a key older than the acquirer's key retention
// (keys it had forgotten: charge-api must answer them from its record, never send them again).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "chaos_stack.hpp"
#include "chaos_workload.hpp"

namespace charge_outbox::chaos {

// Rows for a PrintTable; read after the load, before the stack stops.
std::map<std::string, std::int64_t> StripeExercise(ChaosStack& stack, const std::vector<Attempt>& attempts);

// The header's words for the run's Stripe settings, e.g. "key retention 20000ms, search lag 3000ms, ...".
std::string DescribeStripeSettings(const StripeSettings& settings);

}  // namespace charge_outbox::chaos
