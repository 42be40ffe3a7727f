// The Kafka keys every client of ours reads the same way: how to reach and authenticate to the brokers
// (kafka.security_protocol, kafka.sasl_*, kafka.ssl_*, kafka.client_id) and the sockets' Nagle setting
// (kafka.socket_nagle_disable), passed to librdkafka under the property's own name. Only these: a typo in
// a security setting must fail at start-up, not connect in plaintext. Secrets (kafka.sasl_password,
// kafka.ssl_key_password) come from the environment only.
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace charge_outbox::config {
class ConfigReader;
}

namespace charge_outbox::kafka {

// Adds the keys that are set to `properties`; throws config::ConfigError naming a bad one.
void ReadClientProperties(config::ConfigReader& reader, std::string_view default_client_id,
                          std::map<std::string, std::string>& properties);

}  // namespace charge_outbox::kafka
