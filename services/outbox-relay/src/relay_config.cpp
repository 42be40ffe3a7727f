#include "relay_config.hpp"

#include <unistd.h>

#include <algorithm>
#include <iterator>

#include "charge_outbox/http/admin_listener.hpp"
#include "charge_outbox/kafka/client_properties.hpp"
#include "charge_outbox/log/log.hpp"
#include "charge_outbox/retry/backoff.hpp"
#include "charge_outbox/util/host.hpp"
#include "relay_loop.hpp"

namespace charge_outbox::outbox_relay {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Producer tuning passed to librdkafka under the property's own name (the connection and security keys
// are every client's: kafka::ReadClientProperties).
struct PassThrough {
  const char* key;
  const char* property;
  const char* fallback;
};
constexpr PassThrough kPassThrough[] = {
    {"kafka.compression_type", "compression.type", "lz4"},
    // Batches the burst of a claim; the publisher's flush sends the tail without waiting for it.
    {"kafka.linger_ms", "linger.ms", "5"},
    {"kafka.batch_num_messages", "batch.num.messages", "10000"},
    {"kafka.batch_size", "batch.size", "1000000"},
    {"kafka.message_max_bytes", "message.max.bytes", "1000000"},
    {"kafka.queue_buffering_max_messages", "queue.buffering.max.messages", "100000"},
};

}  // namespace

RelayConfig LoadConfig(config::ConfigReader& r, bool need_kafka) {
  RelayConfig c;
  // The relay has no API: its one listener is its admin port (docs/operations.md, "Ports"), named as every daemon's is.
  c.http = http::LoadAdminServerOptions(r);
  c.database_url = r.Secret("database.url");
  c.database = db::LoadConnectionSettings(r);
  c.instance_id = r.String("instance.id", util::HostAndProcess("outbox-relay"));

  c.kafka_bootstrap_servers = r.String("kafka.bootstrap_servers", need_kafka ? std::nullopt : std::optional<std::string>(""));
  if (need_kafka && c.kafka_bootstrap_servers.empty()) {
    throw config::ConfigError("kafka.bootstrap_servers", "must not be empty (set KAFKA_BOOTSTRAP_SERVERS)");
  }
  c.kafka_topic = r.String("kafka.topic", "charge-events");
  if (c.kafka_topic.empty()) throw config::ConfigError("kafka.topic", "must not be empty");
  c.loop.create_topic = r.Boolean("kafka.create_topic", true);
  c.loop.topic_partitions = static_cast<int>(r.Integer("kafka.topic_partitions", 6, 1, 10'000));
  c.loop.topic_replication_factor = static_cast<int>(r.Integer("kafka.topic_replication_factor", 1, 1, 100));
  c.loop.topic_timeout = r.Duration("kafka.topic_timeout", seconds{10}, milliseconds{100}, std::chrono::minutes{5});
  // How long librdkafka keeps trying one message; the batch waits for it, so it bounds a batch.
  const auto message_timeout = r.Duration("kafka.message_timeout", seconds{30}, milliseconds{1000}, std::chrono::hours{1});
  c.kafka_properties["message.timeout.ms"] = std::to_string(message_timeout.count());
  // How long a request to a broker may go unanswered (librdkafka's default is a minute): a black-holed
  // broker's in-flight messages are failed after it, and the batch deadline below counts on it.
  const auto socket_timeout = r.Duration("kafka.socket_timeout", seconds{10}, milliseconds{1000}, std::chrono::minutes{5});
  c.kafka_properties["socket.timeout.ms"] = std::to_string(socket_timeout.count());
  c.kafka_delivery_deadline = message_timeout + socket_timeout;
  kafka::ReadClientProperties(r, "outbox-relay", c.kafka_properties);
  for (const auto& p : kPassThrough) {
    const auto value = r.String(p.key, std::string(p.fallback));
    if (!value.empty()) c.kafka_properties[p.property] = value;
  }

  // ce_source names the daemon that wrote the event (the outbox row's producer, migration 0009):
  // <source_base>/charge-api or <source_base>/reconciler. cloudevents.source is for rows that name none.
  c.loop.cloudevents_source_base = r.String("cloudevents.source_base", "/charge-outbox");
  if (c.loop.cloudevents_source_base.empty()) throw config::ConfigError("cloudevents.source_base", "must not be empty");
  c.loop.cloudevents_source = r.String("cloudevents.source", "/charge-outbox/charge-api");
  if (c.loop.cloudevents_source.empty()) throw config::ConfigError("cloudevents.source", "must not be empty");
  // binary: the attributes in ce_* headers (the default); structured: in the value, for sinks that drop
  // Kafka headers (docs/events.md). One mode for the relay's one topic.
  c.loop.cloudevents_structured = r.Choice("cloudevents.mode", "binary", {"binary", "structured"}) == "structured";
  // Relay loops in this process, each with its own session (a member of its own) and producer: they
  // overlap one loop's wait on Kafka with another's database work.
  c.workers = static_cast<int>(r.Integer("relay.workers", 1, 1, 64));
  c.loop.batch_size = static_cast<int>(r.Integer("relay.batch_size", 1000, 1, 100'000));
  // Up to this many events of one charge per batch, each produced once the previous one is persisted.
  c.loop.waves = static_cast<int>(r.Integer("relay.waves", 4, 1, 16));
  c.loop.poll_interval = r.Duration("relay.poll_interval", seconds{1}, milliseconds{10}, std::chrono::minutes{10});
  // Latency traded for the database's work per event: docs/outbox-relay.md, "Linger". It replaces the
  // wake delay (after a notification) and the idle grace (now kAwakePolls lingers) of earlier releases.
  r.Renamed("relay.wake_delay", "relay.linger");
  r.Renamed("relay.idle_grace", "relay.linger");
  c.loop.linger = r.Duration("relay.linger", milliseconds{10}, milliseconds{0}, seconds{1});
  c.loop.rebalance_interval =
      r.Duration("relay.rebalance_interval", seconds{1}, milliseconds{50}, std::chrono::minutes{10});
  r.Renamed("relay.retry_backoff", "relay.backoff.base");
  r.Renamed("relay.max_retry_backoff", "relay.backoff.max");
  c.loop.backoff =
      retry::LoadBackoffOptions(r, "relay", RelayLoopOptions{}.backoff, milliseconds{1}, std::chrono::minutes{10});
  // Liveness: a loop is live while its steps end. The longest step a healthy loop takes is the longest of
  // its bounded waits; past that (with a margin) it is wedged and Kubernetes should restart it.
  const auto longest_step = std::max({c.database.call_timeout + c.loop.poll_interval, c.kafka_delivery_deadline,
                                      c.loop.topic_timeout + seconds{1}, c.loop.backoff.max});
  c.liveness_timeout = r.Duration("relay.liveness_timeout",
                                  std::max<milliseconds>(seconds{30}, longest_step + seconds{10}), milliseconds{100},
                                  std::chrono::hours{1});
  if (c.liveness_timeout <= longest_step) {
    throw config::ConfigError("relay.liveness_timeout",
                              "must be longer than the longest step of a healthy relay loop (" +
                                  std::to_string(longest_step.count()) +
                                  "ms: the longest of database.call_timeout + relay.poll_interval, kafka.message_timeout "
                                  "+ kafka.socket_timeout, kafka.topic_timeout + 1s, relay.backoff.max), or a "
                                  "working relay would be restarted");
  }

  // The loop's claims share a transaction, idle between them for a linger (at most a mark's delay, 50 ms:
  // a longer sleep ends it first) or 100 ms of Kafka's reports: a shorter server-side timeout would end
  // the session, and the shards with it, every few claims.
  if (const auto idle = c.database.idle_in_transaction_timeout; idle.count() > 0 && idle < seconds{1}) {
    throw config::ConfigError("database.idle_in_transaction_timeout",
                              "must be 0 (the server's setting) or at least 1s for the relay: its claims share a "
                              "transaction, idle up to a linger or 100 ms of Kafka's reports between them");
  }

  c.metrics_refresh = r.Duration("metrics.refresh_interval", seconds{2}, milliseconds{50}, std::chrono::minutes{10});
  c.retention_enabled = r.Boolean("retention.enabled", true);
  c.retention_interval = r.Duration("retention.interval", std::chrono::hours{1}, seconds{1}, std::chrono::hours{24});
  c.retention.retention_days = static_cast<int>(r.Integer("retention.days", 7, 1, 3650));
  c.retention.days_ahead = static_cast<int>(r.Integer("retention.days_ahead", 2, 1, 365));
  c.retention.lock_timeout = r.Duration("retention.lock_timeout", milliseconds{500}, milliseconds{1}, seconds{60});

  c.shutdown_deadline = r.Duration("shutdown.deadline", seconds{20}, milliseconds{100});
  c.log_level = r.Choice("log.level", "info", {std::begin(log::kLevels), std::end(log::kLevels)});
  r.RejectUnknownKeys();
  // Not retention.* (RETENTION_): the benchmarks' scripts use RETENTION_PASS for themselves.
  r.RejectUnknownEnvironment({"relay", "cloudevents"});
  return c;
}

}  // namespace charge_outbox::outbox_relay
