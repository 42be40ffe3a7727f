// RelayProbe: every metric outbox-relay exposes, registered once; the relay calls these methods and never
// touches the registry. Every name starts with `outbox_`, the relay's prefix (the product contract fixes
// `outbox_lag_seconds`); the names, their labels and the naming rule are in docs/metrics.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

#include "charge_outbox/kafka/event_publisher.hpp"
#include "charge_outbox/metrics/metrics.hpp"
#include "charge_outbox/outbox/outbox_store.hpp"

namespace charge_outbox::outbox_relay {

// Thread-safe (prometheus-cpp metrics are).
class RelayProbe {
 public:
  // `workers`: relay loops in this process; the owned-shards gauge is their sum.
  RelayProbe(metrics::Registry& registry, int workers);

  // From the table, not from this process's work: a relay alive but stuck shows a growing lag.
  void SetBacklog(const outbox::BacklogStats& stats);
  void OnPublished(std::int64_t events);
  void OnRetriableErrors(std::int64_t events);
  void OnParked(std::int64_t events);
  void OnBatch(std::chrono::nanoseconds latency, std::size_t events);
  void SetOwnership(int worker, std::size_t owned_shards, int members);
  void OnRetention(const outbox::RetentionReport& report);
  void OnDatabaseError();
  void OnProducerRecreated();
  // 1 for the cause of the last undelivered batch, 0 for the others; all 0 (kNone) once one is delivered.
  void SetKafkaStall(kafka::StallCause cause);

 private:
  prometheus::Gauge& lag_;
  prometheus::Gauge& unpublished_;
  prometheus::Gauge& parked_rows_;
  prometheus::Counter& published_;
  prometheus::Family<prometheus::Counter>& errors_;
  prometheus::Counter& transient_errors_;
  prometheus::Counter& never_errors_;
  prometheus::Counter& parked_;
  prometheus::Histogram& batch_latency_;
  prometheus::Histogram& batch_size_;
  prometheus::Gauge& owned_shards_;
  prometheus::Gauge& members_;
  prometheus::Gauge& retention_kept_;
  prometheus::Counter& retention_dropped_;
  prometheus::Counter& database_errors_;
  prometheus::Counter& producer_recreations_;
  prometheus::Family<prometheus::Gauge>& kafka_stalled_;
  std::vector<std::pair<kafka::StallCause, prometheus::Gauge*>> stall_causes_;
  std::mutex mutex_;
  std::vector<std::size_t> owned_by_worker_;
};

}  // namespace charge_outbox::outbox_relay
