// settlement-projection's configuration: the YAML file and environment overrides (config/config.hpp);
// every key is listed in README.md.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "charge_outbox/http/server.hpp"
#include "charge_outbox/inbox/inbox.hpp"
#include "charge_outbox/util/sha256.hpp"

namespace charge_outbox::config {
class ConfigReader;
}

namespace charge_outbox::settlement {

struct ProjectionConfig {
  http::ServerOptions http;   // the query API
  http::ServerOptions admin;  // /healthz, /readyz, /metrics
  // http.token_hashes: the SHA-256 of every bearer token the API accepts (api_tokens.hpp); the daemon
  // refuses to serve with none (RequireApiTokens), `migrate` needs none.
  std::vector<util::Sha256Digest> api_token_hashes;
  std::chrono::milliseconds readiness_reuse{1'000};  // how long a /readyz answer is reused
  inbox::InboxOptions inbox;  // the topic, the group, the database, the inbox's policies
  std::size_t database_pool_size = 4;  // connections serving queries (the consumer has its own)
  std::chrono::milliseconds liveness_timeout{60'000};
  std::chrono::milliseconds shutdown_deadline{10'000};
  std::string log_level = "info";
};

// Throws config::ConfigError naming the first bad key.
ProjectionConfig LoadConfig(config::ConfigReader& reader);

// The daemon serves its API only to bearer tokens: throws config::ConfigError naming http.token_hashes
// when the configuration accepts none.
void RequireApiTokens(const ProjectionConfig& config);

}  // namespace charge_outbox::settlement
