#include "captured_totals.hpp"

#include <boost/json/monotonic_resource.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "charge_outbox/util/time.hpp"

namespace charge_outbox::settlement {
namespace {

namespace json = boost::json;

// The printable-ASCII identifiers and codes of the contract; anything else is not stored.
std::optional<std::string> Text(const json::object& o, std::string_view key, std::size_t limit) {
  const auto* v = o.if_contains(key);
  if (v == nullptr || !v->is_string()) return std::nullopt;
  const auto& s = v->as_string();
  if (s.empty() || s.size() > limit) return std::nullopt;
  for (const char c : s) {
    if (c <= ' ' || c > '~') return std::nullopt;
  }
  return std::string(s);
}

// "YYYY-MM-DD" of the UTC day the event happened.
std::string Day(const inbox::ChargeEvent& event) { return util::FormatRfc3339(event.event_time).substr(0, 10); }

}  // namespace

std::optional<ChargeState> Fold(const std::optional<ChargeState>& before, const inbox::ChargeEvent& event,
                                std::map<TotalsKey, TotalsDelta>& deltas) {
  unsigned char buffer[4096];  // the parsed payload's nodes, for this call only
  json::monotonic_resource resource(buffer, sizeof buffer);
  boost::system::error_code ec;
  const auto payload = json::parse(event.payload, ec, &resource);
  if (ec || !payload.is_object()) return std::nullopt;
  const auto& o = payload.as_object();
  const auto merchant = Text(o, "merchant_id", 128);
  const auto currency = Text(o, "currency", 3);
  const auto status = Text(o, "status", 32);
  const auto* amount = o.if_contains("amount");
  if (!merchant || !currency || currency->size() != 3 || !status || amount == nullptr || !amount->is_int64() ||
      amount->as_int64() < 0) {
    return std::nullopt;
  }
  ChargeState after{.merchant_id = *merchant,
                    .currency = *currency,
                    .amount = amount->as_int64(),
                    .status = *status,
                    .captured_day = std::nullopt,
                    .sequence = event.sequence};
  const bool was_captured = before && before->captured_day.has_value();
  if (after.status == "captured") {
    // Captured once, on its first capture's day; a charge stays on that day while it stays captured.
    after.captured_day = was_captured ? before->captured_day : std::optional<std::string>(Day(event));
  }
  if (was_captured && !after.captured_day) {
    auto& d = deltas[{before->merchant_id, *before->captured_day, before->currency}];
    d.count -= 1;
    d.amount -= before->amount;
  } else if (!was_captured && after.captured_day) {
    auto& d = deltas[{after.merchant_id, *after.captured_day, after.currency}];
    d.count += 1;
    d.amount += after.amount;
  } else if (was_captured && after.captured_day && (before->amount != after.amount ||
                                                     before->merchant_id != after.merchant_id ||
                                                     before->currency != after.currency)) {
    // The same capture restated with other terms (never expected; the charge is immutable): move it.
    auto& out = deltas[{before->merchant_id, *before->captured_day, before->currency}];
    out.count -= 1;
    out.amount -= before->amount;
    auto& in = deltas[{after.merchant_id, *after.captured_day, after.currency}];
    in.count += 1;
    in.amount += after.amount;
  }
  return after;
}

CapturedTotals::CapturedTotals(std::function<void(const inbox::ChargeEvent&)> on_skipped)
    : on_skipped_(std::move(on_skipped)) {}

void CapturedTotals::Apply(db::TextTransaction& tx, const std::vector<const inbox::ChargeEvent*>& events) {
  std::unordered_map<std::string, std::optional<ChargeState>> states;
  std::vector<std::string> ids;  // charges that may have a row: those this batch does not start at sequence 1
  for (const auto* e : events) {
    // The inbox applies each sequence of a charge once and in order: a charge whose first event here is its
    // sequence 1 has never been seen, and has no row to read.
    if (states.try_emplace(e->charge_id).second && e->sequence != 1) ids.push_back(e->charge_id);
  }

  // Another consumer instance could change these rows before this transaction ends (a rebalance), but
  // then the inbox's progress check rolls this batch back: what it writes from them never commits.
  std::unordered_set<std::string> known;  // charges with a row already
  if (!ids.empty()) {
    for (const auto& row : tx.Query(
             "SELECT charge_id, merchant_id, currency, amount, status, captured_day::text, sequence"
             "  FROM settlement_charges WHERE charge_id = ANY($1::text[])",
             {db::TextArray(ids)})) {
      known.insert(*row[0]);
      states[*row[0]] = ChargeState{.merchant_id = *row[1],
                                    .currency = *row[2],
                                    .amount = std::stoll(*row[3]),
                                    .status = *row[4],
                                    .captured_day = row[5],
                                    .sequence = std::stoi(*row[6])};
    }
  }

  std::map<TotalsKey, TotalsDelta> deltas;
  std::unordered_map<std::string, std::chrono::system_clock::time_point> updated;
  for (const auto* e : events) {
    auto& state = states[e->charge_id];
    auto after = Fold(state, *e, deltas);
    if (!after) {
      on_skipped_(*e);
      continue;
    }
    state = std::move(after);
    updated[e->charge_id] = e->event_time;
  }

  // Only a charge that counts has a row: most charges never do (every `initiated` event, every failure),
  // and they cost no write. A row is updated if it was there, inserted if not (cheaper than an upsert of
  // every row; a row another instance added meanwhile makes the insert fail, and the batch is tried
  // again), and deleted when its charge stops counting.
  struct Rows {
    std::vector<std::string> id, merchant, currency, amount, status, day, sequence, at;
    db::TextParams Params() const {
      return {db::TextArray(id),     db::TextArray(merchant), db::TextArray(currency), db::TextArray(amount),
              db::TextArray(status), db::TextArray(day),      db::TextArray(sequence), db::TextArray(at)};
    }
  } changed, added;
  std::vector<std::string> gone;
  for (const auto& [charge, time] : updated) {
    const auto& state = *states[charge];
    if (!state.captured_day) {
      if (known.contains(charge)) gone.push_back(charge);
      continue;
    }
    auto& rows = known.contains(charge) ? changed : added;
    rows.id.push_back(charge);
    rows.merchant.push_back(state.merchant_id);
    rows.currency.push_back(state.currency);
    rows.amount.push_back(std::to_string(state.amount));
    rows.status.push_back(state.status);
    rows.day.push_back(*state.captured_day);
    rows.sequence.push_back(std::to_string(state.sequence));
    rows.at.push_back(std::to_string(util::ToUnixMicros(time)));
  }
  constexpr const char* kRows =
      " FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::date[], $7::int[], $8::bigint[])"
      "   AS u(id, m, c, a, s, d, q, t)";
  if (!changed.id.empty()) {
    tx.Query(std::string("UPDATE settlement_charges SET merchant_id = u.m, currency = u.c, amount = u.a, status = u.s,"
                         " captured_day = u.d, sequence = u.q,"
                         " updated_at = 'epoch'::timestamptz + u.t * interval '1 microsecond'") +
                 kRows + " WHERE charge_id = u.id",
             changed.Params());
  }
  if (!added.id.empty()) {
    tx.Query(std::string("INSERT INTO settlement_charges (charge_id, merchant_id, currency, amount, status, captured_day,"
                         " sequence, updated_at) SELECT u.id, u.m, u.c, u.a, u.s, u.d, u.q,"
                         " 'epoch'::timestamptz + u.t * interval '1 microsecond'") +
                 kRows,
             added.Params());
  }
  if (!gone.empty()) {
    tx.Query("DELETE FROM settlement_charges WHERE charge_id = ANY($1::text[])", {db::TextArray(gone)});
  }

  std::vector<std::string> merchant, day, currency, count, amount;
  for (const auto& [key, delta] : deltas) {  // in key order: two instances lock the rows in one order
    if (delta.count == 0 && delta.amount == 0) continue;
    merchant.push_back(key.merchant_id);
    day.push_back(key.day);
    currency.push_back(key.currency);
    count.push_back(std::to_string(delta.count));
    amount.push_back(std::to_string(delta.amount));
  }
  if (merchant.empty()) return;
  tx.Query(
      "INSERT INTO captured_totals (merchant_id, day, currency, captured_count, captured_amount)"
      " SELECT u.m, u.d::date, u.c, u.n, u.a FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[])"
      "   AS u(m, d, c, n, a) ORDER BY 1, 2, 3"
      " ON CONFLICT (merchant_id, day, currency) DO UPDATE SET"
      "   captured_count = captured_totals.captured_count + excluded.captured_count,"
      "   captured_amount = captured_totals.captured_amount + excluded.captured_amount",
      {db::TextArray(merchant), db::TextArray(day), db::TextArray(currency), db::TextArray(count),
       db::TextArray(amount)});
}

}  // namespace charge_outbox::settlement
