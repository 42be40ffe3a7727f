// acquirer-sim's configuration: SimConfig, and LoadConfig to read it (keys in README.md).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "charge_outbox/config/config.hpp"
#include "charge_outbox/http/server.hpp"
#include "fault_profile.hpp"

namespace charge_outbox::acquirer_sim {

struct SimConfig {
  http::ServerOptions http;  // http.*, as every daemon spells it
  std::string data_dir;
  std::vector<std::string> api_keys;  // secret: AUTH_API_KEYS, comma-separated
  FaultProfile faults;
  std::chrono::milliseconds shutdown_deadline{};
  std::string log_level;
};

// Throws config::ConfigError naming the key.
SimConfig LoadConfig(config::ConfigReader& reader);

}  // namespace charge_outbox::acquirer_sim
