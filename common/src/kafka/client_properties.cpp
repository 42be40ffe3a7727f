#include "charge_outbox/kafka/client_properties.hpp"

#include "charge_outbox/config/config.hpp"

namespace charge_outbox::kafka {
namespace {

struct PassThrough {
  const char* key;
  const char* property;
};
constexpr PassThrough kPassThrough[] = {
    {"kafka.security_protocol", "security.protocol"},
    {"kafka.sasl_mechanism", "sasl.mechanism"},
    {"kafka.sasl_username", "sasl.username"},
    {"kafka.ssl_ca_location", "ssl.ca.location"},
    {"kafka.ssl_certificate_location", "ssl.certificate.location"},
    {"kafka.ssl_key_location", "ssl.key.location"},
    {"kafka.ssl_endpoint_identification_algorithm", "ssl.endpoint.identification.algorithm"},
};
constexpr PassThrough kSecretPassThrough[] = {
    {"kafka.sasl_password", "sasl.password"},
    {"kafka.ssl_key_password", "ssl.key.password"},
};

}  // namespace

void ReadClientProperties(config::ConfigReader& reader, std::string_view default_client_id,
                          std::map<std::string, std::string>& properties) {
  for (const auto& p : kPassThrough) {
    if (auto value = reader.String(p.key, std::string()); !value.empty()) properties[p.property] = std::move(value);
  }
  properties["client.id"] = reader.String("kafka.client_id", std::string(default_client_id));
  // librdkafka 2.0 leaves Nagle's algorithm on, and it sends one request per partition: the second of a
  // batch's requests to a broker then waits for the acknowledgement of the first (docs/outbox-relay.md,
  // "Kafka" and "Where the tail is"). librdkafka batches by linger.ms; the socket need not.
  properties["socket.nagle.disable"] = reader.Boolean("kafka.socket_nagle_disable", true) ? "true" : "false";
  for (const auto& p : kSecretPassThrough) {
    if (auto value = reader.OptionalSecret(p.key); value && !value->empty()) properties[p.property] = *value;
  }
}

}  // namespace charge_outbox::kafka
