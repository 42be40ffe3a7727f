// CapturedTotals: the projection, as an inbox handler. Each merchant's captured count and amount per UTC
// day and currency: a charge counts while its status is `captured`, on the day of its capture, and a
// later event that moves it away (`needs_review` after `captured`) takes it back out of that day.
//
// Fold is the pure part (the tests drive it with events); Apply reads the charges' current state, folds
// the batch and writes the states and the totals' deltas, in the inbox's transaction.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "charge_outbox/inbox/inbox.hpp"

namespace charge_outbox::settlement {

// What the projection keeps of a charge.
struct ChargeState {
  std::string merchant_id;
  std::string currency;
  std::int64_t amount = 0;
  std::string status;
  std::optional<std::string> captured_day;  // "YYYY-MM-DD" while it counts as captured
  int sequence = 0;
};

struct TotalsKey {
  std::string merchant_id;
  std::string day;
  std::string currency;
  auto operator<=>(const TotalsKey&) const = default;
};

struct TotalsDelta {
  std::int64_t count = 0;
  std::int64_t amount = 0;
};

// The charge's new state after `event`, and what it adds to or takes from the totals. nullopt when the
// payload lacks what the projection needs (merchant_id, amount, currency, status): the event is skipped.
std::optional<ChargeState> Fold(const std::optional<ChargeState>& before, const inbox::ChargeEvent& event,
                                std::map<TotalsKey, TotalsDelta>& deltas);

class CapturedTotals final : public inbox::EventHandler {
 public:
  // `on_skipped` is told of each event whose payload the projection cannot use.
  explicit CapturedTotals(std::function<void(const inbox::ChargeEvent&)> on_skipped);
  void Apply(db::TextTransaction& tx, const std::vector<const inbox::ChargeEvent*>& events) override;

 private:
  std::function<void(const inbox::ChargeEvent&)> on_skipped_;
};

}  // namespace charge_outbox::settlement
