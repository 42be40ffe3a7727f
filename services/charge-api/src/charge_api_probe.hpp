// ChargeApiProbe: every metric charge-api exposes, registered once; the code calls these methods and never
// touches the registry. Every name starts with `charge_api_`, charge-api's prefix, except
// `charges_pending_overdue` (fixed by the product contract): the state of the charges table, the same on
// every replica, not of this process. The names, their labels and the naming rule are in docs/metrics.md.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "charge_outbox/acquirer/model.hpp"
#include "charge_outbox/metrics/metrics.hpp"

namespace charge_outbox::charge_api {

// Thread-safe (prometheus-cpp metrics are).
class ChargeApiProbe {
 public:
  explicit ChargeApiProbe(metrics::Registry& registry);

  void OnRequest(std::string_view route, std::string_view method, int status, std::chrono::nanoseconds latency);
  // outcome: captured, declined, failed, pending (unknown at the acquirer), needs_review
  void OnChargeOutcome(std::string_view outcome);
  void OnReplay();
  void OnInFlightConflict();
  void OnAcquirerCall(const acquirer::AttemptOutcome& outcome, std::chrono::nanoseconds latency);
  void SetPendingOverdue(std::int64_t count);
  // Charges in needs_review, by reason (the whole table's count, as every replica reads it). A reason no
  // longer counted drops to 0, so an alert on it resolves.
  void SetNeedsReview(const std::vector<std::pair<std::string, std::int64_t>>& by_reason);
  // API keys looked up in the database, by outcome: found, unknown, error.
  void OnAuthLookup(std::string_view outcome);
  // Requests refused before any work, by reason: failed_auth_limit, merchant_rate_limit.
  void OnRefused(std::string_view reason);
  void SetAuthCacheEntries(std::size_t valid, std::size_t unknown);
  // An anonymous refusal held for its client's turn (ClientRefusalPacer).
  void OnRefusalHeld();
  // Facts waiting for the database (LateRecords), now.
  void SetLateRecords(int outstanding);
  // A proof of the acquirer's that contradicts the recorded state and could not be flagged for review: the
  // client was told "under review", the record still says otherwise until a person or the window report
  // flags it.
  void OnUnflaggedContradiction();
  // A pooled database connection closed because its server went away (a restart, a failover) or turned
  // read-only, and replaced by a fresh one (db::DatabaseOptions::on_connection_replaced).
  void OnDatabaseConnectionReplaced();

 private:
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Histogram>& request_latency_;
  prometheus::Family<prometheus::Counter>& charges_;
  prometheus::Counter& replays_;
  prometheus::Counter& in_flight_conflicts_;
  prometheus::Family<prometheus::Counter>& acquirer_calls_;
  prometheus::Family<prometheus::Histogram>& acquirer_latency_;
  prometheus::Gauge& pending_overdue_;
  prometheus::Family<prometheus::Gauge>& needs_review_;
  std::mutex needs_review_mutex_;
  std::set<std::string> needs_review_reasons_;  // every reason ever exported, under the mutex
  prometheus::Family<prometheus::Counter>& auth_lookups_;
  prometheus::Family<prometheus::Counter>& refused_;
  prometheus::Family<prometheus::Gauge>& auth_cache_entries_;
  prometheus::Counter& refusals_held_;
  prometheus::Gauge& late_records_;
  prometheus::Counter& unflagged_contradictions_;
  prometheus::Counter& database_connections_replaced_;
};

}  // namespace charge_outbox::charge_api
