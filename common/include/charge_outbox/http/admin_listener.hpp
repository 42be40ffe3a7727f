// The admin listener's options (admin.*): the port of /healthz, /readyz and /metrics that charge-api,
// outbox-relay and settlement-projection each open without a key, to any pod that can reach it.
#pragma once

#include "charge_outbox/config/config.hpp"
#include "charge_outbox/http/server.hpp"

namespace charge_outbox::http {

// Bounded so that no client can make the kubelet's probes fail (issue 44): a few connections per client,
// a few seconds idle or trickling, and connections kept for a client that has none (the kubelet's next
// probe, Prometheus's next scrape) however many clients hold the rest. Reads admin.address, admin.port,
// admin.max_connections, admin.max_connections_per_client, admin.reserved_connections,
// admin.idle_timeout and admin.read_timeout (docs/configuration.md). Throws config::ConfigError.
ServerOptions LoadAdminServerOptions(config::ConfigReader& r);

}  // namespace charge_outbox::http
