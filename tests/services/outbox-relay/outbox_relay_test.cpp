// outbox-relay without I/O: the Kafka message built from an event (both CloudEvents modes, ce_source and
// ce_dataschema), and configuration (defaults, the environment overrides the local stack relies on,
// security pass-through, secrets from the environment).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

#include <fstream>
#include <sstream>

#include "relay_config.hpp"
#include "relay_loop.hpp"

namespace charge_outbox::outbox_relay {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

config::EnvLookup Env(std::map<std::string, std::string> values) {
  return [values](const std::string& name) -> std::optional<std::string> {
    const auto it = values.find(name);
    if (it == values.end()) return std::nullopt;
    return it->second;
  };
}

outbox::OutboxEvent Captured() {
  return {.id = "6f1c2a4e-0000-4000-8000-000000000001",
          .aggregateid = "ch_0123456789abcdef0123456789abcdef",
          .type = "payments.charge.captured.v1",
          .payload = R"({"id":"ch_0123456789abcdef0123456789abcdef","sequence":2})",
          .sequence = 2,
          .shard = 239,
          .position = 7,
          .traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
          .producer = "reconciler",
          .created_at_us = 1'796'007'600'123'456,
          .time = "2026-11-30T03:00:00.123Z"};
}

TEST(ToMessageTest, KeyValueAndCloudEventsBinaryModeHeaders) {
  auto e = Captured();
  const std::string source = "/charge-outbox/reconciler";
  const std::string dataschema = "https://charge-outbox.example/schemas/events/payments.charge.captured.v1.json";
  const auto m = ToMessage(e, source, dataschema);
  EXPECT_EQ(m.key, e.aggregateid);
  EXPECT_EQ(m.value, e.payload);
  EXPECT_THAT(m.headers, ElementsAre(Pair("ce_specversion", "1.0"), Pair("ce_id", e.id),
                                     Pair("ce_source", "/charge-outbox/reconciler"), Pair("ce_type", e.type),
                                     Pair("ce_time", e.time), Pair("ce_subject", e.aggregateid),
                                     Pair("ce_dataschema", dataschema), Pair("content-type", "application/json"),
                                     Pair("traceparent", e.traceparent)));
  e.traceparent.clear();
  EXPECT_EQ(ToMessage(e, source, dataschema).headers.size(), 8u);  // no empty traceparent header
}

TEST(ToMessageTest, StructuredModeCarriesTheAttributesAndThePayloadInTheValue) {
  auto e = Captured();
  std::string value;
  const auto m = ToStructuredMessage(e, "/charge-outbox/reconciler", "https://s.example/x.json", value);
  EXPECT_EQ(m.key, e.aggregateid);
  EXPECT_EQ(m.value.data(), value.data());  // refers to the value it built, no copy
  EXPECT_THAT(m.headers, ElementsAre(Pair("content-type", "application/cloudevents+json"),
                                     Pair("traceparent", e.traceparent)));
  const auto envelope = boost::json::parse(m.value).as_object();
  EXPECT_EQ(envelope.at("specversion").as_string(), "1.0");
  EXPECT_EQ(envelope.at("id").as_string(), e.id);
  EXPECT_EQ(envelope.at("source").as_string(), "/charge-outbox/reconciler");
  EXPECT_EQ(envelope.at("type").as_string(), e.type);
  EXPECT_EQ(envelope.at("subject").as_string(), e.aggregateid);
  EXPECT_EQ(envelope.at("time").as_string(), e.time);
  EXPECT_EQ(envelope.at("datacontenttype").as_string(), "application/json");
  EXPECT_EQ(envelope.at("dataschema").as_string(), "https://s.example/x.json");
  EXPECT_EQ(envelope.at("traceparent").as_string(), e.traceparent);
  EXPECT_EQ(envelope.at("data"), boost::json::parse(e.payload));
  EXPECT_EQ(envelope.size(), 10u);

  // Attribute text is quoted, whatever a row holds; no traceparent, no attribute and no header.
  e.type = "odd \"type\"\\\n";
  e.traceparent.clear();
  const auto odd = ToStructuredMessage(e, "/s", "d", value);
  EXPECT_EQ(boost::json::parse(odd.value).at("type").as_string(), e.type);
  EXPECT_FALSE(boost::json::parse(odd.value).as_object().contains("traceparent"));
  EXPECT_EQ(odd.headers.size(), 1u);
}

TEST(EventAttributesTest, SourceNamesTheProducerAndDataSchemaTheType) {
  EventAttributes attributes("/charge-outbox", "/charge-outbox/fallback");
  EXPECT_EQ(attributes.Source("reconciler"), "/charge-outbox/reconciler");
  EXPECT_EQ(attributes.Source("charge-api"), "/charge-outbox/charge-api");
  // Built once: the same characters for every event of that producer.
  EXPECT_EQ(attributes.Source("reconciler").data(), attributes.Source("reconciler").data());
  // No producer recorded (rows from before migration 0009), or one a URI must not carry raw.
  EXPECT_EQ(attributes.Source(""), "/charge-outbox/fallback");
  EXPECT_EQ(attributes.Source("psql 15/x"), "/charge-outbox/fallback");
  EXPECT_EQ(attributes.Source("Reconciler"), "/charge-outbox/fallback");
  EXPECT_EQ(attributes.DataSchema("payments.charge.captured.v1"),
            "https://charge-outbox.example/schemas/events/payments.charge.captured.v1.json");
}

// ce_dataschema names a schema the repository holds: schemas/events/<type>.json, whose $id it is.
TEST(EventAttributesTest, EveryEventTypeNamesASchemaInTheRepository) {
  EventAttributes attributes("/charge-outbox", "/charge-outbox/charge-api");
  for (const char* type : {"payments.charge.initiated.v1", "payments.charge.captured.v1", "payments.charge.failed.v1",
                           "payments.charge.canceled.v1", "payments.charge.needs_review.v1"}) {
    std::ifstream file(std::string(PROJECT_SOURCE_DIR) + "/schemas/events/" + type + ".json");
    ASSERT_TRUE(file) << type;
    std::stringstream text;
    text << file.rdbuf();
    const auto schema = boost::json::parse(text.str()).as_object();
    EXPECT_EQ(schema.at("$id").as_string(), attributes.DataSchema(type));
    EXPECT_EQ(schema.at("$schema").as_string(), "https://json-schema.org/draft/2020-12/schema");
  }
}

TEST(RelayConfigTest, DefaultsAndTheEnvironmentTheLocalStackSets) {
  auto reader = config::ConfigReader::FromString(
      "", Env({{"DATABASE_URL", "postgresql://db/x"}, {"KAFKA_BOOTSTRAP_SERVERS", "k:9092"}, {"KAFKA_TOPIC", "events"},
               {"ADMIN_PORT", "0"}}));
  const auto c = LoadConfig(reader, true);
  EXPECT_EQ(c.database_url, "postgresql://db/x");
  EXPECT_EQ(c.kafka_bootstrap_servers, "k:9092");
  EXPECT_EQ(c.kafka_topic, "events");
  EXPECT_EQ(c.http.port, 0);
  EXPECT_EQ(c.loop.batch_size, 1000);
  EXPECT_EQ(c.kafka_properties.at("message.timeout.ms"), "30000");
  EXPECT_EQ(c.kafka_properties.at("compression.type"), "lz4");
  EXPECT_FALSE(c.kafka_properties.contains("security.protocol"));
  EXPECT_EQ(c.retention.retention_days, 7);

  auto defaults = config::ConfigReader::FromString(
      "", Env({{"DATABASE_URL", "postgresql://db/x"}, {"KAFKA_BOOTSTRAP_SERVERS", "k:9092"}}));
  EXPECT_EQ(LoadConfig(defaults, true).kafka_topic, "charge-events");
}

TEST(RelayConfigTest, SecuritySettingsPassThroughAndSecretsComeFromTheEnvironmentOnly) {
  auto reader = config::ConfigReader::FromString(
      "kafka:\n  security_protocol: SASL_SSL\n  sasl_mechanism: SCRAM-SHA-512\n  sasl_username: relay\n"
      "  ssl_ca_location: /etc/ca.pem\n",
      Env({{"DATABASE_URL", "postgresql://db/x"}, {"KAFKA_BOOTSTRAP_SERVERS", "k:9093"},
           {"KAFKA_SASL_PASSWORD", "s3cret"}}));
  const auto c = LoadConfig(reader, true);
  EXPECT_EQ(c.kafka_properties.at("security.protocol"), "SASL_SSL");
  EXPECT_EQ(c.kafka_properties.at("sasl.mechanism"), "SCRAM-SHA-512");
  EXPECT_EQ(c.kafka_properties.at("sasl.username"), "relay");
  EXPECT_EQ(c.kafka_properties.at("sasl.password"), "s3cret");
  EXPECT_EQ(c.kafka_properties.at("ssl.ca.location"), "/etc/ca.pem");

  auto in_file = config::ConfigReader::FromString(
      "kafka:\n  sasl_password: oops\n", Env({{"DATABASE_URL", "x"}, {"KAFKA_BOOTSTRAP_SERVERS", "k:9093"}}));
  EXPECT_THROW(LoadConfig(in_file, true), config::ConfigError);
}

TEST(RelayConfigTest, NaglesAlgorithmIsOffUnlessConfiguredAndABadValueIsAConfigErrorNamingTheKey) {
  const auto env = Env({{"DATABASE_URL", "postgresql://db/x"}, {"KAFKA_BOOTSTRAP_SERVERS", "k:9092"}});
  auto defaults = config::ConfigReader::FromString("", env);
  EXPECT_EQ(LoadConfig(defaults, true).kafka_properties.at("socket.nagle.disable"), "true");

  auto on = config::ConfigReader::FromString("kafka:\n  socket_nagle_disable: false\n", env);
  EXPECT_EQ(LoadConfig(on, true).kafka_properties.at("socket.nagle.disable"), "false");

  auto bad = config::ConfigReader::FromString("kafka:\n  socket_nagle_disable: sometimes\n", env);
  try {
    LoadConfig(bad, true);
    FAIL() << "a value that is not a boolean was accepted";
  } catch (const config::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("kafka.socket_nagle_disable"), std::string::npos) << e.what();
  }
}

TEST(RelayConfigTest, TheDaemonNeedsKafkaAndTheSubcommandsDoNot) {
  auto daemon = config::ConfigReader::FromString("", Env({{"DATABASE_URL", "postgresql://db/x"}}));
  try {
    LoadConfig(daemon, true);
    FAIL() << "no bootstrap servers accepted";
  } catch (const config::ConfigError& e) {
    EXPECT_EQ(e.key(), "kafka.bootstrap_servers");
  }
  auto command = config::ConfigReader::FromString("", Env({{"DATABASE_URL", "postgresql://db/x"}}));
  EXPECT_NO_THROW(LoadConfig(command, false));
  auto typo = config::ConfigReader::FromString(
      "relay:\n  batchsize: 10\n", Env({{"DATABASE_URL", "x"}, {"KAFKA_BOOTSTRAP_SERVERS", "k:1"}}));
  EXPECT_THROW(LoadConfig(typo, true), config::ConfigError);
}

TEST(RelayConfigTest, CloudEventsSourcesAndMode) {
  const std::map<std::string, std::string> base{{"DATABASE_URL", "postgresql://db/x"},
                                                {"KAFKA_BOOTSTRAP_SERVERS", "k:9092"}};
  auto defaults = config::ConfigReader::FromString("", Env(base));
  const auto d = LoadConfig(defaults, true);
  EXPECT_EQ(d.loop.cloudevents_source_base, "/charge-outbox");
  EXPECT_EQ(d.loop.cloudevents_source, "/charge-outbox/charge-api");
  EXPECT_FALSE(d.loop.cloudevents_structured);

  auto structured = config::ConfigReader::FromString(
      "cloudevents:\n  mode: structured\n  source_base: /payments/eu\n", Env(base));
  const auto s = LoadConfig(structured, true);
  EXPECT_TRUE(s.loop.cloudevents_structured);
  EXPECT_EQ(s.loop.cloudevents_source_base, "/payments/eu");

  for (const auto& [yaml, key] : std::vector<std::pair<std::string, std::string>>{
           {"cloudevents:\n  mode: json\n", "cloudevents.mode"},
           {"cloudevents:\n  source_base: ''\n", "cloudevents.source_base"}}) {
    auto bad = config::ConfigReader::FromString(yaml, Env(base));
    try {
      LoadConfig(bad, true);
      ADD_FAILURE() << yaml << " accepted";
    } catch (const config::ConfigError& e) {
      EXPECT_EQ(e.key(), key);
    }
  }
}

// Every call has a deadline, and liveness is derived from them: a healthy loop's longest step (a Kafka
// wave: message timeout + socket timeout, 40 s by default) never reads as wedged.
TEST(RelayConfigTest, DeadlinesAndTheLivenessTimeoutDerivedFromThem) {
  const std::map<std::string, std::string> base{{"DATABASE_URL", "postgresql://db/x"},
                                                {"KAFKA_BOOTSTRAP_SERVERS", "k:9092"}};
  auto defaults = config::ConfigReader::FromString("", Env(base));
  const auto c = LoadConfig(defaults, true);
  EXPECT_EQ(c.database.call_timeout, std::chrono::seconds{10});
  EXPECT_EQ(c.database.statement_timeout, std::chrono::seconds{5});
  EXPECT_EQ(c.kafka_properties.at("socket.timeout.ms"), "10000");
  EXPECT_EQ(c.kafka_delivery_deadline, std::chrono::seconds{40});
  EXPECT_EQ(c.liveness_timeout, std::chrono::seconds{50});

  auto shorter = config::ConfigReader::FromString(
      "kafka:\n  message_timeout: 2s\n  socket_timeout: 2s\n  topic_timeout: 1s\ndatabase:\n  call_timeout: 2s\n"
      "  statement_timeout: 1s\nrelay:\n  backoff:\n    max: 1s\n  liveness_timeout: 5s\n",
      Env(base));
  const auto s = LoadConfig(shorter, true);
  EXPECT_EQ(s.liveness_timeout, std::chrono::seconds{5});
  EXPECT_EQ(s.kafka_delivery_deadline, std::chrono::seconds{4});

  auto refused = [&](const std::string& yaml, const std::string& key) {
    auto reader = config::ConfigReader::FromString(yaml, Env(base));
    try {
      LoadConfig(reader, true);
      ADD_FAILURE() << "accepted: " << yaml;
    } catch (const config::ConfigError& e) {
      EXPECT_THAT(e.what(), ::testing::HasSubstr(key));
    }
  };
  refused("relay:\n  liveness_timeout: 20s\n", "relay.liveness_timeout");  // below the Kafka delivery deadline
  refused("database:\n  call_timeout: 1s\n", "database.call_timeout");    // below the statement timeout
  // Below the idle time between the claims of one transaction; 0 (the server's setting) and 1s are taken.
  refused("database:\n  idle_in_transaction_timeout: 200ms\n", "database.idle_in_transaction_timeout");
  auto one_second = config::ConfigReader::FromString("database:\n  idle_in_transaction_timeout: 1s\n", Env(base));
  EXPECT_EQ(LoadConfig(one_second, true).database.idle_in_transaction_timeout, std::chrono::seconds{1});
}

// The relay's config from `yaml`, with the two required variables and `env`.
RelayConfig LoadWith(const std::string& yaml, std::map<std::string, std::string> env = {}) {
  env.insert({{"DATABASE_URL", "postgresql://db/x"}, {"KAFKA_BOOTSTRAP_SERVERS", "k:9092"}});
  auto reader = config::ConfigReader::FromString(yaml, Env(env));
  return LoadConfig(reader, true);
}

// A configuration the relay refuses: `key` is named, and the problem mentions `names`.
struct Refusal {
  std::string yaml;
  std::map<std::string, std::string> env;
  std::string key, names;
};

void ExpectRefused(const std::vector<Refusal>& refusals) {
  for (const auto& r : refusals) {
    try {
      LoadWith(r.yaml, r.env);
      ADD_FAILURE() << r.key << " accepted";
    } catch (const config::ConfigError& e) {
      EXPECT_EQ(e.key(), r.key);
      EXPECT_THAT(e.problem(), ::testing::HasSubstr(r.names));
    }
  }
}

// The backoff keys are spelled `relay.backoff.*` like every daemon's; the old spellings fail at start,
// naming the new key, instead of being ignored for the default.
TEST(RelayConfigTest, BackoffKeysAndTheirOldSpellingsRefused) {
  EXPECT_EQ(LoadWith("").loop.backoff.base, std::chrono::milliseconds{200});
  EXPECT_EQ(LoadWith("").loop.backoff.max, std::chrono::seconds{5});
  const auto set = LoadWith("relay:\n  backoff:\n    base: 50ms\n    max: 2s\n");
  EXPECT_EQ(set.loop.backoff.base, std::chrono::milliseconds{50});
  EXPECT_EQ(set.loop.backoff.max, std::chrono::seconds{2});

  ExpectRefused({
      {"relay:\n  retry_backoff: 100ms\n", {}, "relay.retry_backoff", "relay.backoff.base"},
      {"", {{"RELAY_MAX_RETRY_BACKOFF", "1s"}}, "relay.max_retry_backoff", "RELAY_BACKOFF_MAX"},
      {"relay:\n  backoff:\n    base: 2s\n    max: 1s\n", {}, "relay.backoff.max", "relay.backoff.base"},
  });
}

// One latency setting, relay.linger; the two it replaced fail at start, naming it.
TEST(RelayConfigTest, LingerAndTheTwoKeysItReplaced) {
  EXPECT_EQ(LoadWith("").loop.linger, std::chrono::milliseconds{10});
  EXPECT_EQ(LoadWith("relay:\n  linger: 20ms\n").loop.linger, std::chrono::milliseconds{20});
  EXPECT_EQ(LoadWith("", {{"RELAY_LINGER", "0s"}}).loop.linger, std::chrono::milliseconds{0});
  ExpectRefused({
      {"relay:\n  wake_delay: 5ms\n", {}, "relay.wake_delay", "relay.linger"},
      {"", {{"RELAY_IDLE_GRACE", "50ms"}}, "relay.idle_grace", "RELAY_LINGER"},
      {"relay:\n  linger: 2s\n", {}, "relay.linger", "1000ms"},
  });
}

}  // namespace
}  // namespace charge_outbox::outbox_relay
