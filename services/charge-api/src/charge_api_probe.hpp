// ChargeApiProbe: every metric charge-api exposes (spec section 8), registered once; the code calls
// these methods and never touches the registry.
#pragma once

#include <chrono>
#include <memory>
#include <string_view>

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

 private:
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Histogram>& request_latency_;
  prometheus::Family<prometheus::Counter>& charges_;
  prometheus::Counter& replays_;
  prometheus::Counter& in_flight_conflicts_;
  prometheus::Family<prometheus::Counter>& acquirer_calls_;
  prometheus::Family<prometheus::Histogram>& acquirer_latency_;
  prometheus::Gauge& pending_overdue_;
};

}  // namespace charge_outbox::charge_api
