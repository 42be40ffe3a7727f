#include "charge_api_probe.hpp"

#include <string>

namespace charge_outbox::charge_api {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

ChargeApiProbe::ChargeApiProbe(metrics::Registry& registry)
    : requests_(BuildCounter()
                    .Name("charge_api_http_requests_total")
                    .Help("HTTP requests by route, method and status")
                    .Register(registry)),
      request_latency_(BuildHistogram()
                           .Name("charge_api_http_request_duration_seconds")
                           .Help("HTTP request latency by route, from the first byte read to the reply")
                           .Register(registry)),
      charges_(BuildCounter()
                   .Name("charge_api_charges_total")
                   .Help("Charges answered, by outcome (captured, declined, failed, pending, needs_review)")
                   .Register(registry)),
      replays_(BuildCounter()
                   .Name("charge_api_idempotent_replays_total")
                   .Help("Repeated requests answered with the stored first response")
                   .Register(registry)
                   .Add({})),
      in_flight_conflicts_(BuildCounter()
                               .Name("charge_api_in_flight_conflicts_total")
                               .Help("Repeated requests refused with 409 while the first was still running")
                               .Register(registry)
                               .Add({})),
      acquirer_calls_(BuildCounter()
                          .Name("charge_api_acquirer_calls_total")
                          .Help("Acquirer calls by operation, outcome and evidence class")
                          .Register(registry)),
      acquirer_latency_(BuildHistogram()
                            .Name("charge_api_acquirer_call_duration_seconds")
                            .Help("Acquirer call latency by operation and evidence class")
                            .Register(registry)),
      pending_overdue_(BuildGauge()
                           .Name("charges_pending_overdue")
                           .Help("Charges still pending past the configured deadline")
                           .Register(registry)
                           .Add({})),
      auth_lookups_(BuildCounter()
                        .Name("charge_api_auth_lookups_total")
                        .Help("API keys looked up in the database (not answered from memory), by outcome")
                        .Register(registry)),
      refused_(BuildCounter()
                   .Name("charge_api_refused_requests_total")
                   .Help("Requests refused with 429 before any work, by reason")
                   .Register(registry)),
      auth_cache_entries_(BuildGauge()
                              .Name("charge_api_auth_cache_entries")
                              .Help("API key hashes remembered, by answer (valid, unknown)")
                              .Register(registry)),
      refusals_held_(BuildCounter()
                         .Name("charge_api_refusals_held_total")
                         .Help("Answers to anonymous clients (no route, method, key) held to pace their client")
                         .Register(registry)
                         .Add({})) {
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

void ChargeApiProbe::SetPendingOverdue(std::int64_t count) { pending_overdue_.Set(static_cast<double>(count)); }

}  // namespace charge_outbox::charge_api
