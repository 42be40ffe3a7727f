#include "charge_api_probe.hpp"

#include <string>

namespace charge_outbox::charge_api {

ChargeApiProbe::ChargeApiProbe(metrics::Registry& registry)
    : requests_(metrics::CounterFamily(registry, "charge_api_http_requests_total",
                                       "HTTP requests answered, both ports, by route, method and status")),
      request_latency_(metrics::HistogramFamily(registry, "charge_api_http_request_duration_seconds",
                                                "HTTP request latency by route, from the first byte read to the reply")),
      charges_(metrics::CounterFamily(registry, "charge_api_charges_total",
                                      "Charges answered, by the status they were answered with")),
      replays_(metrics::Counter(registry, "charge_api_idempotent_replays_total",
                                "Repeated requests answered with the stored first response")),
      in_flight_conflicts_(metrics::Counter(registry, "charge_api_in_flight_conflicts_total",
                                            "Repeated requests refused with 409 while the first was still running")),
      acquirer_calls_(metrics::CounterFamily(registry, "charge_api_acquirer_calls_total",
                                             "Acquirer calls, each attempt counted, by operation, outcome and evidence class")),
      acquirer_latency_(metrics::HistogramFamily(registry, "charge_api_acquirer_call_duration_seconds",
                                                 "Acquirer call latency, each attempt timed, by operation and evidence class")),
      pending_overdue_(metrics::Gauge(registry, "charges_pending_overdue",
                                      "Charges still pending past charge.pending_overdue_after (not charge.deadline), "
                                      "counted in the charges table")),
      needs_review_(metrics::GaugeFamily(registry, "charges_needs_review",
                                         "Charges in needs_review, waiting for a person's decision")),
      auth_lookups_(metrics::CounterFamily(registry, "charge_api_auth_lookups_total",
                                           "API keys looked up in the database (not answered from memory)")),
      refused_(metrics::CounterFamily(registry, "charge_api_refused_requests_total",
                                      "Requests refused with 429 before any work")),
      auth_cache_entries_(metrics::GaugeFamily(registry, "charge_api_auth_cache_entries",
                                               "API key hashes remembered")),
      refusals_held_(metrics::Counter(registry, "charge_api_refusals_held_total",
                                      "Answers to anonymous clients (no route, method or key) held to pace their client")),
      late_records_(metrics::Gauge(registry, "charge_api_late_records",
                                   "Facts a client was answered on but the database has not taken yet, retried until written")),
      unflagged_contradictions_(metrics::Counter(
          registry, "charge_api_unflagged_contradictions_total",
          "Acquirer proofs against a state another actor recorded first whose review flag could not be written")),
      database_connections_replaced_(metrics::Counter(
          registry, "charge_api_database_connections_replaced_total",
          "Database connections closed because their server went away or turned read-only, each replaced by a "
          "fresh one")) {
  // Every label value is known up front: the series exist (at 0) before the first event.
  for (const char* outcome : {"found", "unknown", "error"}) auth_lookups_.Add({{"outcome", outcome}});
  for (const char* reason : {"failed_auth_limit", "merchant_rate_limit"}) refused_.Add({{"reason", reason}});
  SetAuthCacheEntries(0, 0);
}

void ChargeApiProbe::OnRequest(std::string_view route, std::string_view method, int status,
                               std::chrono::nanoseconds latency) {
  requests_.Add({{"route", std::string(route)}, {"method", std::string(method)}, {"status", std::to_string(status)}})
      .Increment();
  request_latency_.Add({{"route", std::string(route)}}, metrics::LatencyBuckets())
      .Observe(std::chrono::duration<double>(latency).count());
}

void ChargeApiProbe::OnChargeOutcome(std::string_view outcome) {
  charges_.Add({{"outcome", std::string(outcome)}}).Increment();
}

void ChargeApiProbe::OnReplay() { replays_.Increment(); }

void ChargeApiProbe::OnInFlightConflict() { in_flight_conflicts_.Increment(); }

void ChargeApiProbe::OnAcquirerCall(const acquirer::AttemptOutcome& outcome, std::chrono::nanoseconds latency) {
  const std::string operation(acquirer::ToString(outcome.operation));
  const std::string evidence(acquirer::ToString(outcome.evidence()));
  acquirer_calls_
      .Add({{"operation", operation}, {"outcome", std::string(acquirer::ToString(outcome.kind))}, {"evidence", evidence}})
      .Increment();
  acquirer_latency_.Add({{"operation", operation}, {"evidence", evidence}}, metrics::LatencyBuckets())
      .Observe(std::chrono::duration<double>(latency).count());
}

void ChargeApiProbe::OnAuthLookup(std::string_view outcome) {
  auth_lookups_.Add({{"outcome", std::string(outcome)}}).Increment();
}

void ChargeApiProbe::OnRefusalHeld() { refusals_held_.Increment(); }

void ChargeApiProbe::OnRefused(std::string_view reason) { refused_.Add({{"reason", std::string(reason)}}).Increment(); }

void ChargeApiProbe::SetAuthCacheEntries(std::size_t valid, std::size_t unknown) {
  auth_cache_entries_.Add({{"answer", "valid"}}).Set(static_cast<double>(valid));
  auth_cache_entries_.Add({{"answer", "unknown"}}).Set(static_cast<double>(unknown));
}

void ChargeApiProbe::SetLateRecords(int outstanding) { late_records_.Set(static_cast<double>(outstanding)); }

void ChargeApiProbe::OnUnflaggedContradiction() { unflagged_contradictions_.Increment(); }

void ChargeApiProbe::SetPendingOverdue(std::int64_t count) { pending_overdue_.Set(static_cast<double>(count)); }

void ChargeApiProbe::SetNeedsReview(const std::vector<std::pair<std::string, std::int64_t>>& by_reason) {
  std::lock_guard lock(needs_review_mutex_);
  std::set<std::string> now;
  for (const auto& [reason, count] : by_reason) {
    needs_review_.Add({{"reason", reason}}).Set(static_cast<double>(count));
    now.insert(reason);
    needs_review_reasons_.insert(reason);
  }
  for (const auto& reason : needs_review_reasons_) {
    if (!now.contains(reason)) needs_review_.Add({{"reason", reason}}).Set(0);
  }
}

void ChargeApiProbe::OnDatabaseConnectionReplaced() { database_connections_replaced_.Increment(); }

}  // namespace charge_outbox::charge_api
