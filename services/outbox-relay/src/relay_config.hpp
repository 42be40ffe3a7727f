// RelayConfig: every setting of outbox-relay, read and validated once at start-up.
#pragma once

#include <chrono>
#include <map>
#include <string>

#include "charge_outbox/config/config.hpp"
#include "charge_outbox/db/database.hpp"
#include "charge_outbox/http/server.hpp"
#include "charge_outbox/outbox/outbox_store.hpp"
#include "relay_loop.hpp"

namespace charge_outbox::outbox_relay {

struct RelayConfig {
  http::ServerOptions http;  // admin.address/admin.port: /healthz, /readyz, /metrics (no API)
  std::string database_url;  // secret: DATABASE_URL
  db::ConnectionSettings database;  // database.* timeouts
  std::string instance_id;

  std::string kafka_bootstrap_servers;
  std::string kafka_topic;
  std::map<std::string, std::string> kafka_properties;  // librdkafka properties, see README
  // The longest one produce-and-wait may take: past it, messages without a report are abandoned (sent
  // again later), whatever librdkafka still does. kafka.message_timeout + kafka.socket_timeout.
  std::chrono::milliseconds kafka_delivery_deadline{};

  int workers = 1;
  // Every loop's options but its index: relay.* (but workers and liveness_timeout), cloudevents.*,
  // kafka.create_topic and kafka.topic_*.
  RelayLoopOptions loop;
  // /healthz answers 503 when a loop has not finished a step for this long (see RelayLoop::last_progress).
  std::chrono::milliseconds liveness_timeout{};

  std::chrono::milliseconds metrics_refresh{};
  bool retention_enabled = true;
  std::chrono::milliseconds retention_interval{};
  outbox::RetentionPolicy retention;

  std::chrono::milliseconds shutdown_deadline{};
  std::string log_level;
};

// Reads every key (services/outbox-relay/README.md); throws config::ConfigError naming the first bad one.
// `need_kafka` is false for the subcommands, which only touch the database.
RelayConfig LoadConfig(config::ConfigReader& reader, bool need_kafka);

}  // namespace charge_outbox::outbox_relay
