// Metrics: one Prometheus registry per process, exposed as text on /metrics. Each component registers
// its metrics in a small probe class of its own (charge-api's ChargeApiProbe, ...) and its logic calls
// the probe, never the registry.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <memory>
#include <string>

namespace charge_outbox::metrics {

using Registry = prometheus::Registry;

std::shared_ptr<Registry> NewRegistry();

// The Prometheus text exposition format (version 0.0.4) of everything registered.
std::string RenderText(Registry& registry);
inline constexpr const char* kTextContentType = "text/plain; version=0.0.4; charset=utf-8";

// Latency buckets in seconds, from 1 ms to 30 s: wide enough for a database round trip and an acquirer
// timeout alike.
prometheus::Histogram::BucketBoundaries LatencyBuckets();

// A metric family registered under its name and help, for a probe's constructor: the family when the
// probe adds its labelled series itself, or the one series without labels when the metric has none.
// Both live as long as the registry; the probe keeps the reference.
prometheus::Family<prometheus::Counter>& CounterFamily(Registry& registry, const std::string& name,
                                                       const std::string& help);
prometheus::Family<prometheus::Gauge>& GaugeFamily(Registry& registry, const std::string& name,
                                                   const std::string& help);
prometheus::Family<prometheus::Histogram>& HistogramFamily(Registry& registry, const std::string& name,
                                                           const std::string& help);
prometheus::Counter& Counter(Registry& registry, const std::string& name, const std::string& help);
prometheus::Gauge& Gauge(Registry& registry, const std::string& name, const std::string& help);
prometheus::Histogram& Histogram(Registry& registry, const std::string& name, const std::string& help,
                                 const prometheus::Histogram::BucketBoundaries& buckets);

}  // namespace charge_outbox::metrics
