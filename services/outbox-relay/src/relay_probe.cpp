#include "relay_probe.hpp"

namespace charge_outbox::outbox_relay {

RelayProbe::RelayProbe(metrics::Registry& registry, int workers)
    : lag_(metrics::Gauge(registry, "outbox_lag_seconds",
                          "Age of the oldest unpublished event, parked ones included, from the table")),
      unpublished_(metrics::Gauge(registry, "outbox_unpublished_rows",
                                  "Outbox events not yet published, parked ones included, from the table")),
      parked_rows_(metrics::Gauge(registry, "outbox_parked_rows",
                                  "Outbox events parked because Kafka refused them permanently, from the table; "
                                  "each holds back its charge")),
      published_(metrics::Counter(registry, "outbox_events_published_total",
                                  "Events delivered to Kafka (persisted) and marked published by this relay")),
      errors_(metrics::CounterFamily(registry, "outbox_publish_errors_total",
                                     "Events not delivered, by retryability: transient (sent again) or never (parked)")),
      transient_errors_(errors_.Add({{"retryability", "transient"}})),
      never_errors_(errors_.Add({{"retryability", "never"}})),
      parked_(metrics::Counter(registry, "outbox_events_parked_total", "Events this relay parked")),
      batch_latency_(metrics::Histogram(registry, "outbox_batch_duration_seconds",
                                        "From claiming a batch to committing its marks, every delivery report included",
                                        metrics::LatencyBuckets())),
      batch_size_(metrics::Histogram(registry, "outbox_batch_events",
                                     "Events per claimed batch",
                                     prometheus::Histogram::BucketBoundaries{1, 10, 100, 500, 1000, 5000, 10000})),
      owned_shards_(metrics::Gauge(registry, "outbox_owned_shards",
                                   "Shards (of 256) this process holds the advisory lock of, all its workers together")),
      members_(metrics::Gauge(registry, "outbox_live_relays",
                              "Live relay sessions sharing the shards, this one included")),
      retention_kept_(metrics::Gauge(registry, "outbox_retention_kept_partitions",
                                     "Day partitions past retention kept because they hold an unpublished event")),
      retention_dropped_(metrics::Counter(registry, "outbox_retention_dropped_partitions_total",
                                          "Day partitions dropped by retention")),
      database_errors_(metrics::Counter(registry, "outbox_database_errors_total",
                                        "Database operations of the relay loop that failed (retried)")),
      producer_recreations_(metrics::Counter(registry, "outbox_producer_recreations_total",
                                             "Kafka producers destroyed and created again after a fatal producer "
                                             "error; their events without a persisted report are sent again")),
      kafka_stalled_(metrics::GaugeFamily(registry, "outbox_kafka_stalled",
                                          "1 for why the relay's last batch was not delivered, as the cluster's "
                                          "metadata tells, 0 for the other causes; all 0 once a batch is delivered")),
      owned_by_worker_(static_cast<std::size_t>(workers), 0) {
  for (const auto cause : {kafka::StallCause::kBrokersUnreachable, kafka::StallCause::kNoLeader,
                           kafka::StallCause::kNotEnoughReplicas, kafka::StallCause::kUnknown}) {
    stall_causes_.emplace_back(cause, &kafka_stalled_.Add({{"cause", std::string(kafka::StallCauseName(cause))}}));
  }
}

void RelayProbe::SetBacklog(const outbox::BacklogStats& stats) {
  lag_.Set(stats.oldest_age_seconds);
  unpublished_.Set(static_cast<double>(stats.unpublished));
  parked_rows_.Set(static_cast<double>(stats.parked));
}

void RelayProbe::OnPublished(std::int64_t events) { published_.Increment(static_cast<double>(events)); }
void RelayProbe::OnRetriableErrors(std::int64_t events) { transient_errors_.Increment(static_cast<double>(events)); }

void RelayProbe::OnParked(std::int64_t events) {
  never_errors_.Increment(static_cast<double>(events));
  parked_.Increment(static_cast<double>(events));
}

void RelayProbe::OnBatch(std::chrono::nanoseconds latency, std::size_t events) {
  batch_latency_.Observe(std::chrono::duration<double>(latency).count());
  batch_size_.Observe(static_cast<double>(events));
}

void RelayProbe::SetOwnership(int worker, std::size_t owned_shards, int members) {
  std::lock_guard lock(mutex_);
  owned_by_worker_.at(static_cast<std::size_t>(worker)) = owned_shards;
  std::size_t total = 0;
  for (auto n : owned_by_worker_) total += n;
  owned_shards_.Set(static_cast<double>(total));
  members_.Set(members);
}

void RelayProbe::OnRetention(const outbox::RetentionReport& report) {
  if (report.skipped) return;
  retention_kept_.Set(static_cast<double>(report.kept_unpublished.size()));
  retention_dropped_.Increment(static_cast<double>(report.dropped.size()));
}

void RelayProbe::OnDatabaseError() { database_errors_.Increment(); }
void RelayProbe::OnProducerRecreated() { producer_recreations_.Increment(); }

void RelayProbe::SetKafkaStall(kafka::StallCause cause) {
  for (auto& [c, gauge] : stall_causes_) gauge->Set(c == cause ? 1.0 : 0.0);
}

}  // namespace charge_outbox::outbox_relay
