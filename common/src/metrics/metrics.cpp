#include "charge_outbox/metrics/metrics.hpp"

#include <prometheus/text_serializer.h>

namespace charge_outbox::metrics {

std::shared_ptr<Registry> NewRegistry() { return std::make_shared<Registry>(); }

std::string RenderText(Registry& registry) { return prometheus::TextSerializer().Serialize(registry.Collect()); }

prometheus::Histogram::BucketBoundaries LatencyBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
}

}  // namespace charge_outbox::metrics
