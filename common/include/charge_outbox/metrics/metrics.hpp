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

}  // namespace charge_outbox::metrics
