#include "charge_outbox/metrics/metrics.hpp"

#include <prometheus/text_serializer.h>

namespace charge_outbox::metrics {

std::shared_ptr<Registry> NewRegistry() { return std::make_shared<Registry>(); }

std::string RenderText(Registry& registry) { return prometheus::TextSerializer().Serialize(registry.Collect()); }

prometheus::Histogram::BucketBoundaries LatencyBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
}

prometheus::Family<prometheus::Counter>& CounterFamily(Registry& registry, const std::string& name,
                                                       const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(registry);
}

prometheus::Family<prometheus::Gauge>& GaugeFamily(Registry& registry, const std::string& name,
                                                   const std::string& help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(registry);
}

prometheus::Family<prometheus::Histogram>& HistogramFamily(Registry& registry, const std::string& name,
                                                           const std::string& help) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(registry);
}

prometheus::Counter& Counter(Registry& registry, const std::string& name, const std::string& help) {
  return CounterFamily(registry, name, help).Add({});
}

prometheus::Gauge& Gauge(Registry& registry, const std::string& name, const std::string& help) {
  return GaugeFamily(registry, name, help).Add({});
}

prometheus::Histogram& Histogram(Registry& registry, const std::string& name, const std::string& help,
                                 const prometheus::Histogram::BucketBoundaries& buckets) {
  return HistogramFamily(registry, name, help).Add({}, buckets);
}

}  // namespace charge_outbox::metrics
