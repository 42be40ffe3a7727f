// Kafka stopped for 30 s while events keep coming, then restarted: nothing is lost, per-charge order
// holds, the lag gauge (read from the table) grows during the outage and recovers after it, the relay says
// why it waits (`outbox_kafka_stalled{cause="brokers_unreachable"}`, and in its warning), and the stuck
// relay holds no lock a DDL statement on the outbox would wait behind.
//
// This suite needs a broker it may stop, so it starts its own: the same `kafka_start`/`kafka_stop`
// functions of deploy/local/lib/kafka.sh that tests/run uses, on free ports with a state directory of its
// own, from the jars tests/run already fetched. The shared broker of the other suites is never touched.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "relay_fixture.hpp"
#include "test_env.hpp"

namespace charge_outbox::testing {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr const char* kUnreachable = "outbox_kafka_stalled{cause=\"brokers_unreachable\"}";

TEST(OutboxRelayKafkaOutageE2E, KafkaStoppedFor30SecondsLosesNothingAndTheLagRecovers) {
  OwnBroker broker;
  broker.Start();
  ::setenv("KAFKA_BOOTSTRAP_SERVERS", broker.bootstrap().c_str(), 1);  // KafkaTestTopic and the relay use it
  RelayE2E fixture("KafkaStoppedFor30Seconds", 3);
  auto relay = fixture.StartRelay({{"KAFKA_MESSAGE_TIMEOUT", "10s"}, {"RELAY_BACKOFF_MAX", "1s"}});
  auto before = WriteChargeEvents(fixture.db().url(), 200, 2);
  ASSERT_TRUE(Eventually([&] { return Unpublished(fixture.db()) == 0; }, 60s)) << relay->Output();

  broker.Stop();
  const auto stopped_at = std::chrono::steady_clock::now();
  auto during = WriteChargeEvents(fixture.db().url(), 200, 2);
  // The relay is alive but stuck: the lag, read from the table, keeps growing.
  ASSERT_TRUE(Eventually([&] { return MetricValue(relay->admin_port(), "outbox_lag_seconds") >= 10.0; }, 30s));
  EXPECT_GT(Unpublished(fixture.db()), 0);
  // And it says why, once a batch's reports come back undelivered (kafka.message_timeout).
  EXPECT_TRUE(Eventually([&] { return MetricValue(relay->admin_port(), kUnreachable) == 1.0; }, 20s))
      << relay->Output();
  EXPECT_EQ(MetricValue(relay->admin_port(), "outbox_kafka_stalled{cause=\"not_enough_replicas\"}"), 0.0);
  EXPECT_THAT(relay->Output(), HasSubstr("; kafka: brokers_unreachable: no metadata from any broker"));
  // Waiting on Kafka, the relay's session is not left in a transaction (its claims' transaction ends):
  // the server would end it after database.idle_in_transaction_timeout, taking the relay's shards, and
  // meanwhile retention's DETACH and a migration would wait behind its lock, and writers behind them.
  // (A claim's transaction lasts until the first 100 ms of waiting for reports have passed.)
  const auto relay_session = [&] {
    return fixture.db().Scalar(
        "SELECT string_agg(CASE WHEN state = 'idle in transaction' AND now() - state_change > interval '1 second'"
        " THEN 'held' ELSE 'free' END, ',') FROM pg_stat_activity"
        " WHERE datname = current_database() AND application_name = 'outbox-relay'");
  };
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(relay_session(), "free") << "look " << i;
    EXPECT_TRUE(OutboxLockedWithin(fixture.db(), 500ms)) << "look " << i;
    std::this_thread::sleep_for(300ms);
  }
  std::this_thread::sleep_for(30s - (std::chrono::steady_clock::now() - stopped_at));  // the outage's length is the test
  broker.Start();

  ASSERT_TRUE(Eventually([&] { return Unpublished(fixture.db()) == 0; }, 90s)) << relay->Output();
  EXPECT_TRUE(Eventually([&] { return MetricValue(relay->admin_port(), "outbox_lag_seconds") == 0.0; }, 10s));
  EXPECT_EQ(MetricValue(relay->admin_port(), kUnreachable), 0.0);
  EXPECT_GT(MetricValue(relay->admin_port(), "outbox_publish_errors_total{retryability=\"transient\"}").value_or(0),
            0.0);
  std::vector<WrittenEvent> all = before;
  all.insert(all.end(), during.begin(), during.end());
  const auto consumed = ConsumeAll(fixture.topic(), all, 60s);
  EXPECT_THAT(ContractViolations(consumed, all), IsEmpty());
}

}  // namespace
}  // namespace charge_outbox::testing
