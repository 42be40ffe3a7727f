#include "relay_probe.hpp"

namespace charge_outbox::outbox_relay {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

RelayProbe::RelayProbe(metrics::Registry& registry, int workers)
    : lag_(BuildGauge()
               .Name("outbox_lag_seconds")
               .Help("Age of the oldest unpublished outbox event (parked ones included), read from the table")
               .Register(registry)
               .Add({})),
      unpublished_(BuildGauge()
                       .Name("outbox_unpublished_rows")
                       .Help("Outbox events not yet published, parked ones included")
                       .Register(registry)
                       .Add({})),
      parked_rows_(BuildGauge()
                       .Name("outbox_parked_rows")
                       .Help("Outbox events parked because Kafka refused them permanently; they hold back their charge")
                       .Register(registry)
                       .Add({})),
      published_(BuildCounter()
                     .Name("outbox_events_published_total")
                     .Help("Events delivered to Kafka (persisted) and marked published by this relay")
                     .Register(registry)
                     .Add({})),
      errors_(BuildCounter()
                  .Name("outbox_publish_errors_total")
                  .Help("Events not delivered, by retryability: transient (sent again) or never (parked)")
                  .Register(registry)),
      transient_errors_(errors_.Add({{"retryability", "transient"}})),
      never_errors_(errors_.Add({{"retryability", "never"}})),
      parked_(BuildCounter()
                  .Name("outbox_events_parked_total")
                  .Help("Events this relay parked")
                  .Register(registry)
                  .Add({})),
      batch_latency_(BuildHistogram()
                         .Name("outbox_batch_duration_seconds")
                         .Help("From claiming a batch to committing its marks (produce and every delivery report included)")
                         .Register(registry)
                         .Add({}, metrics::LatencyBuckets())),
      batch_size_(BuildHistogram()
                      .Name("outbox_batch_events")
                      .Help("Events per claimed batch")
                      .Register(registry)
                      .Add({}, prometheus::Histogram::BucketBoundaries{1, 10, 100, 500, 1000, 5000, 10000})),
      owned_shards_(BuildGauge()
                        .Name("outbox_owned_shards")
                        .Help("Shards (of 256) this relay holds the advisory lock of")
                        .Register(registry)
                        .Add({})),
      members_(BuildGauge()
                   .Name("outbox_live_relays")
                   .Help("Live relay sessions sharing the shards, this one included")
                   .Register(registry)
                   .Add({})),
      retention_kept_(BuildGauge()
                          .Name("outbox_retention_kept_partitions")
                          .Help("Day partitions past retention kept because they hold an unpublished event")
                          .Register(registry)
                          .Add({})),
      retention_dropped_(BuildCounter()
                             .Name("outbox_retention_dropped_partitions_total")
                             .Help("Day partitions dropped by retention")
                             .Register(registry)
                             .Add({})),
      database_errors_(BuildCounter()
                           .Name("outbox_database_errors_total")
                           .Help("Database operations of the relay loop that failed (retried)")
                           .Register(registry)
                           .Add({})),
      owned_by_worker_(static_cast<std::size_t>(workers), 0) {}

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

}  // namespace charge_outbox::outbox_relay
