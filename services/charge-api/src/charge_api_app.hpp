// ChargeApiApp: charge-api's configuration and the object that wires it together (the payments pool, the
// authentication and readiness connections, charge store, acquirer client, service, limits, the API and
// admin listeners, background gauge refresh).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "charge_outbox/acquirer/http_acquirer_client.hpp"
#include "charge_outbox/config/config.hpp"
#include "charge_outbox/db/database.hpp"
#include "charge_outbox/http/server.hpp"
#include "refusal_pacer.hpp"

namespace charge_outbox::charge_api {

struct ChargeApiConfig {
  http::ServerOptions http;   // the API port
  http::ServerOptions admin;  // the admin port: /healthz, /readyz, /metrics
  std::string database_url;  // secret: DATABASE_URL
  db::DatabaseOptions database;  // database.pool_size, database.max_queued and the database.* timeouts
  acquirer::AcquirerClientConfig acquirer;
  std::string instance_id;
  std::chrono::milliseconds lease{};
  std::chrono::milliseconds deadline{};
  std::chrono::milliseconds pending_overdue_after{};
  std::chrono::milliseconds pending_overdue_refresh{};
  std::chrono::milliseconds auth_cache_ttl{};
  std::size_t auth_cache_size = 10'000;
  std::size_t auth_unknown_cache_size = 10'000;
  std::size_t auth_pool_size = 2;
  std::size_t auth_max_queued = 64;
  double auth_failed_rate = 5;
  double auth_failed_burst = 50;
  std::size_t auth_failed_clients = 100'000;
  RefusalPacing refusal_pacing;
  double merchant_rate = 2000;
  double merchant_burst = 4000;
  std::chrono::milliseconds readiness_reuse{};
  std::chrono::milliseconds shutdown_deadline{};
  std::string log_level;
};

// Reads every key (see services/charge-api/README.md); throws config::ConfigError naming the first bad one.
ChargeApiConfig LoadConfig(config::ConfigReader& reader);

// Lifecycle: construct, Start() once, Stop() once. Not thread-safe itself; the parts it owns are.
class ChargeApiApp {
 public:
  explicit ChargeApiApp(ChargeApiConfig config);
  ~ChargeApiApp();

  struct Ports {
    std::uint16_t api = 0;
    std::uint16_t admin = 0;
  };
  // Starts serving; returns the bound ports.
  Ports Start();
  // Stops accepting, lets requests in flight finish within `drain`, then stops the rest.
  void Stop(std::chrono::milliseconds drain);

 private:
  struct Parts;
  std::unique_ptr<Parts> parts_;
};

}  // namespace charge_outbox::charge_api
