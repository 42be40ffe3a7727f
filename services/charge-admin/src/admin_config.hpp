// charge-admin's configuration: the database and the acquirer, with the keys and secrets the reconciler
// reads (a person's decision asks the same acquirer with the same credentials).
#pragma once

#include <string>

#include "charge_outbox/acquirer/http_acquirer_client.hpp"
#include "charge_outbox/config/config.hpp"
#include "charge_outbox/db/database.hpp"

namespace charge_outbox::charge_admin {

struct AdminConfig {
  std::string database_url;  // secret: DATABASE_URL
  db::DatabaseOptions database;
  acquirer::AcquirerClientConfig acquirer;
  std::string log_level = "warn";  // a command's output is its answer; logs go to stderr
};

// Throws config::ConfigError naming the first bad key.
AdminConfig LoadConfig(config::ConfigReader& reader);

}  // namespace charge_outbox::charge_admin
