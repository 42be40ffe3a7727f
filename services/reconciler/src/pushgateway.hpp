// Pushgateway: where the reconciler's figures go. A run is a process that exits, so nothing scrapes it:
// it pushes them to a Prometheus Pushgateway, grouped by job and mode (`/metrics/job/reconciler/mode/sweep`),
// so a window report never overwrites the sweep's figures.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "charge_outbox/metrics/metrics.hpp"
#include "reconciler_config.hpp"
#include "run_summary.hpp"

namespace charge_outbox::reconciler {

struct PushgatewayAddress {
  std::string host;  // with its scheme: "http://pushgateway"
  std::string port;
};

// Parses "http://host:port" (or https, with an optional trailing slash); nullopt for anything else, so
// the config can refuse it at start, naming the key.
std::optional<PushgatewayAddress> ParsePushgatewayUrl(const std::string& url);

// Pushes every metric of `registry` with HTTP POST (replacing only the metrics this push carries, so a
// failed run keeps the last success's timestamp). Returns the HTTP status, or a negative number when
// the gateway could not be reached or the URL is not one ParsePushgatewayUrl reads.
int PushToGateway(const PushgatewayOptions& options, RunMode mode, std::shared_ptr<metrics::Registry> registry);

}  // namespace charge_outbox::reconciler
