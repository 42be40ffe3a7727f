// outbox-relay when a dependency hangs instead of failing (issue 14, defect 4): a FaultProxy of the test's
// own between the relay and PostgreSQL or Kafka black-holes the traffic (connections stay open, nothing
// answers, as over a partitioned link). Each call has a deadline, so the relay's loop keeps turning; a
// relay cut off from the database gives its shards up and another relay publishes them; a loop that does
// stall is reported not live by /healthz; a black-holed broker costs retries, never an event.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "fault_proxy.hpp"
#include "http_test_client.hpp"
#include "relay_fixture.hpp"
#include "test_env.hpp"

namespace charge_outbox::testing {
namespace {

using namespace std::chrono_literals;
using ::testing::IsEmpty;
using Clock = std::chrono::steady_clock;

// Where the relay answers its probes and scrapes.
std::uint16_t ProbePort(const ServiceProcess& relay) {
  return relay.admin_port() != 0 ? relay.admin_port() : relay.port();
}

unsigned Status(const ServiceProcess& relay, const std::string& path) {
  HttpTestClient client(ProbePort(relay), "127.0.0.1", 5s);
  const auto r = client.Get(path);
  return r.ok() ? r.status() : 0u;
}

double OwnedShards(const ServiceProcess& relay) {
  return MetricValue(ProbePort(relay), "outbox_owned_shards").value_or(-1);
}

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Short deadlines, so that a test sees each of them fire in seconds.
const EnvChanges kShortDeadlines{{"DATABASE_CONNECT_TIMEOUT", "2s"}, {"DATABASE_STATEMENT_TIMEOUT", "1s"},
                                 {"DATABASE_CALL_TIMEOUT", "2s"},    {"DATABASE_KEEPALIVES_IDLE", "1s"},
                                 {"DATABASE_KEEPALIVES_INTERVAL", "1s"}, {"DATABASE_TCP_USER_TIMEOUT", "3s"},
                                 {"RELAY_BACKOFF_MAX", "500ms"}};

EnvChanges With(EnvChanges env, const EnvChanges& more) {
  for (const auto& [k, v] : more) env[k] = v;
  return env;
}

// Relay A reaches PostgreSQL through the proxy, relay B directly; they share the shards. The proxy then
// black-holes A's database traffic: A's calls fail at database.call_timeout, A drops its session (the
// proxy passes the close on, as the server's keepalives would), the server frees A's advisory locks, and
// B takes every shard and publishes what is written meanwhile. Before the deadlines A waited forever
// inside its claim, still holding half the shards, and /healthz said 200 all along.
TEST(OutboxRelayHungDatabaseE2E, ARelayCutOffFromTheDatabaseGivesItsShardsToAnother) {
  RelayE2E fixture("HungDatabase");
  FaultProxy proxy(UriEndpoint(fixture.db().url()).host, UriEndpoint(fixture.db().url()).port);
  const auto via_proxy = WithEndpoint(fixture.db().url(), {"127.0.0.1", proxy.port()});
  auto a = fixture.StartRelay(With(kShortDeadlines, {{"DATABASE_URL", via_proxy}, {"INSTANCE_ID", "relay-a"}}));
  ASSERT_TRUE(Eventually([&] { return OwnedShards(*a) == 256.0; }, 20s)) << a->Output();
  auto b = fixture.StartRelay(With(kShortDeadlines, {{"INSTANCE_ID", "relay-b"}}));
  ASSERT_TRUE(Eventually([&] { return OwnedShards(*a) == 128.0 && OwnedShards(*b) == 128.0; }, 20s))
      << a->Output() << b->Output();
  auto written = WriteChargeEvents(fixture.db().url(), 40, 2);
  ASSERT_TRUE(Eventually([&] { return Unpublished(fixture.db()) == 0; }, 20s));

  proxy.BlackHole();
  const auto cut = Clock::now();
  ASSERT_TRUE(Eventually([&] { return OwnedShards(*b) == 256.0; }, 20s))
      << "relay B never got relay A's shards\n" << a->Output();
  const auto moved = Clock::now() - cut;
  ASSERT_TRUE(Eventually([&] { return Status(*a, "/readyz") == 503u; }, 10s));
  const auto unready = Clock::now() - cut;
  // Every shard has an owner again: what is written now is published by B alone.
  auto during = WriteChargeEvents(fixture.db().url(), 40, 2);
  const auto written_at = Clock::now();
  ASSERT_TRUE(Eventually([&] { return Unpublished(fixture.db()) == 0; }, 20s)) << b->Output();
  const auto published = Clock::now() - written_at;
  // A is cut off, not wedged: its loop turns (each call fails at its deadline), so it stays live.
  EXPECT_EQ(Status(*a, "/healthz"), 200u);
  EXPECT_EQ(OwnedShards(*a), 0.0);
  std::printf("black hole -> shards moved to B: %.1f s; A not ready: %.1f s; events written meanwhile published: %.1f s\n",
              Seconds(moved), Seconds(unready), Seconds(published));
  EXPECT_LT(moved, 10s);  // call_timeout (2 s) + a poll (1 s) + connect and rebalance, with room

  proxy.Pass();
  EXPECT_TRUE(Eventually([&] { return OwnedShards(*a) == 128.0 && Status(*a, "/readyz") == 200u; }, 20s))
      << a->Output();
  written.insert(written.end(), during.begin(), during.end());
  EXPECT_THAT(ContractViolations(ConsumeAll(fixture.topic(), written, 30s), written), IsEmpty());
}

// A loop that stalls (here a failpoint holds it 12 s after a batch) is not live: /healthz answers 503
// within relay.liveness_timeout, so Kubernetes restarts it. Before, /healthz only asked whether the loop
// had returned, and answered 200 throughout.
TEST(OutboxRelayLivenessE2E, AStalledLoopIsReportedNotLive) {
  RelayE2E fixture("StalledLoop");
  auto relay = fixture.StartRelay(With(kShortDeadlines, {{"FAILPOINTS", "relay.after_publish_before_mark=sleep(12000)"},
                                                         {"KAFKA_MESSAGE_TIMEOUT", "2s"},
                                                         {"KAFKA_SOCKET_TIMEOUT", "2s"},
                                                         {"KAFKA_TOPIC_TIMEOUT", "1s"},
                                                         {"RELAY_LIVENESS_TIMEOUT", "5s"}}));
  ASSERT_TRUE(Eventually([&] { return Status(*relay, "/readyz") == 200u; }, 20s)) << relay->Output();
  EXPECT_EQ(Status(*relay, "/healthz"), 200u);
  // Idle turns count as progress: a relay with nothing to do stays live past the timeout.
  std::this_thread::sleep_for(6s);
  EXPECT_EQ(Status(*relay, "/healthz"), 200u);

  WriteEvent(fixture.db().url(), NewUuid(), 1);
  const auto written = Clock::now();
  ASSERT_TRUE(Eventually([&] { return Status(*relay, "/healthz") == 503u; }, 10s)) << relay->Output();
  const auto detected = Clock::now() - written;
  HttpTestClient client(ProbePort(*relay));
  EXPECT_EQ(client.Get("/healthz").response.body(), R"({"status":"stalled"})");
  std::printf("loop stalled -> /healthz 503 after %.1f s (relay.liveness_timeout 5 s)\n", Seconds(detected));
  EXPECT_GE(detected, 4s);
  EXPECT_LT(detected, 8s);
}

// The relay's broker black-holed (a broker of the test's own, advertising the proxy's port, so that every
// connection the producer makes goes through it): each batch ends at the delivery deadline
// (kafka.message_timeout + kafka.socket_timeout) as retriable errors, the loop stays live, and once the
// network heals every event written meanwhile arrives, in order. Before, a batch waited for librdkafka's
// one-minute socket timeout and longer.
TEST(OutboxRelayHungKafkaE2E, ABlackHoledBrokerCostsRetriesNotTheLoop) {
  OwnBroker broker;
  FaultProxy proxy("127.0.0.1", static_cast<std::uint16_t>(broker.port()));
  broker.Start(proxy.port());
  const std::string bootstrap = "127.0.0.1:" + std::to_string(proxy.port());
  ::setenv("KAFKA_BOOTSTRAP_SERVERS", bootstrap.c_str(), 1);  // KafkaTestTopic reads it
  RelayE2E fixture("HungKafka", 3);
  auto relay = fixture.StartRelay(With(kShortDeadlines, {{"KAFKA_BOOTSTRAP_SERVERS", bootstrap},
                                                         {"KAFKA_MESSAGE_TIMEOUT", "3s"},
                                                         {"KAFKA_SOCKET_TIMEOUT", "2s"},
                                                         {"KAFKA_TOPIC_TIMEOUT", "2s"},
                                                         {"RELAY_LIVENESS_TIMEOUT", "10s"}}));
  auto written = WriteChargeEvents(fixture.db().url(), 20, 2);
  ASSERT_TRUE(Eventually([&] { return Unpublished(fixture.db()) == 0; }, 30s)) << relay->Output();

  proxy.BlackHole();
  const auto cut = Clock::now();
  auto during = WriteChargeEvents(fixture.db().url(), 20, 2);
  const auto retriable = [&] {
    return MetricValue(ProbePort(*relay), "outbox_publish_errors_total{retryability=\"transient\"}").value_or(0);
  };
  ASSERT_TRUE(Eventually([&] { return retriable() > 0; }, 15s)) << relay->Output();
  const auto first_batch_ended = Clock::now() - cut;
  std::printf("broker black-holed -> first batch ended as retriable after %.1f s (deadline 3 s + 2 s)\n",
              Seconds(first_batch_ended));
  EXPECT_LT(first_batch_ended, 10s);
  std::this_thread::sleep_for(3s);
  EXPECT_EQ(Status(*relay, "/healthz"), 200u);  // bounded waits: the loop is live throughout
  EXPECT_GT(Unpublished(fixture.db()), 0);

  proxy.Pass();
  ASSERT_TRUE(Eventually([&] { return Unpublished(fixture.db()) == 0; }, 30s)) << relay->Output();
  written.insert(written.end(), during.begin(), during.end());
  EXPECT_THAT(ContractViolations(ConsumeAll(fixture.topic(), written, 30s), written), IsEmpty());
}

}  // namespace
}  // namespace charge_outbox::testing
