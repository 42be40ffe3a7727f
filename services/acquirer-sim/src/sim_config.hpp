// acquirer-sim's configuration: SimConfig, and LoadConfig to read it (keys in README.md).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "charge_outbox/config/config.hpp"
#include "charge_outbox/http/server.hpp"
#include "fault_profile.hpp"

namespace charge_outbox::acquirer_sim {

// The Stripe dialect's own limits (stripe.* keys).
struct StripeOptions {
  // Searches per second per merchant (a token bucket whose burst is the same number), as Stripe
  // rate-limits its search API apart from the rest.
  std::int64_t search_rate_limit = 20;
  // How long a key's stored answer is kept; a key first used longer ago is a new request (Stripe: 24h).
  std::chrono::milliseconds idempotency_key_retention = std::chrono::hours{24};
};

struct SimConfig {
  http::ServerOptions http;  // http.*, as every daemon spells it
  std::string data_dir;
  std::vector<std::string> api_keys;  // secret: AUTH_API_KEYS, comma-separated
  FaultProfile faults;
  StripeOptions stripe;
  std::chrono::milliseconds shutdown_deadline{};
  std::string log_level;
};

// Throws config::ConfigError naming the key.
SimConfig LoadConfig(config::ConfigReader& reader);

}  // namespace charge_outbox::acquirer_sim
