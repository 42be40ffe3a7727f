#include "pushgateway.hpp"

#include <prometheus/gateway.h>

#include <charconv>
#include <string_view>

namespace charge_outbox::reconciler {

std::optional<PushgatewayAddress> ParsePushgatewayUrl(const std::string& url) {
  std::string_view rest = url;
  std::string scheme;
  if (rest.starts_with("http://")) {
    scheme = "http://";
  } else if (rest.starts_with("https://")) {
    scheme = "https://";
  } else {
    return std::nullopt;
  }
  rest.remove_prefix(scheme.size());
  if (rest.ends_with('/')) rest.remove_suffix(1);
  const auto colon = rest.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || rest.find('/') != std::string_view::npos) return std::nullopt;
  const auto port = rest.substr(colon + 1);
  int value = 0;
  const auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (ec != std::errc{} || ptr != port.data() + port.size() || value < 1 || value > 65535) return std::nullopt;
  return PushgatewayAddress{scheme + std::string(rest.substr(0, colon)), std::string(port)};
}

int PushToGateway(const PushgatewayOptions& options, RunMode mode, std::shared_ptr<metrics::Registry> registry) {
  const auto address = ParsePushgatewayUrl(options.url);
  if (!address) return -1;
  prometheus::Gateway gateway(address->host, address->port, options.job, {{"mode", std::string(ToString(mode))}});
  gateway.RegisterCollectable(registry);
  // prometheus-cpp 1.0 names its methods the other way round from the Pushgateway: its Push() sends POST
  // (replace only the metrics this push carries) and its PushAdd() sends PUT (replace the whole group).
  // POST is what keeps reconciler_last_success_timestamp_seconds across a failed run.
  return gateway.Push();
}

}  // namespace charge_outbox::reconciler
