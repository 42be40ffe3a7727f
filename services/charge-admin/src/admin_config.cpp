#include "admin_config.hpp"

#include <iterator>

#include "charge_outbox/log/log.hpp"

namespace charge_outbox::charge_admin {

AdminConfig LoadConfig(config::ConfigReader& r) {
  AdminConfig c;
  c.database_url = r.Secret("database.url");
  c.database.application_name = "charge-admin";  // the ce_source of the events a person's decision writes
  c.database.connection = db::LoadConnectionSettings(r);
  c.database.connections = static_cast<std::size_t>(r.Integer("database.pool_size", 2, 1, 16));
  c.acquirer = acquirer::LoadAcquirerClientConfig(r);
  c.log_level = r.Choice("log.level", "warn", {std::begin(log::kLevels), std::end(log::kLevels)});
  r.RejectUnknownKeys();
  return c;
}

}  // namespace charge_outbox::charge_admin
