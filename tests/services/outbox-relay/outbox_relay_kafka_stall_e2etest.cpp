// With every broker down the relay waits and says why: once a batch's reports come back undelivered
// (after kafka.message_timeout), `outbox_kafka_stalled{cause="brokers_unreachable"}` is 1 and the warning
// names the cause; when the broker returns it catches up, nothing lost, per-charge order kept, and the
// gauge drops to 0. (Below min.insync.replicas the same gauge says `not_enough_replicas`: that needs a
// cluster of several brokers, since Kafka 3.7+ requires no more replicas in sync than the topic has.)
//
// The broker is the test's own (OwnBroker), which it may stop; the shared broker is never touched.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <iostream>

#include "relay_fixture.hpp"
#include "test_env.hpp"

namespace charge_outbox::testing {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr const char* kUnreachable = "outbox_kafka_stalled{cause=\"brokers_unreachable\"}";

TEST(OutboxRelayKafkaStallE2E, WithEveryBrokerDownTheRelayWaitsSaysWhyAndCatchesUp) {
  OwnBroker broker;
  broker.Start();
  ::setenv("KAFKA_BOOTSTRAP_SERVERS", broker.bootstrap().c_str(), 1);  // KafkaTestTopic and the relay use it
  RelayE2E fixture("KafkaStall", 3);
  auto relay = fixture.StartRelay({{"KAFKA_MESSAGE_TIMEOUT", "2s"}, {"RELAY_BACKOFF_MAX", "1s"}});
  const auto before = WriteChargeEvents(fixture.db().url(), 50, 2);
  ASSERT_TRUE(Eventually([&] { return Unpublished(fixture.db()) == 0; }, 60s)) << relay->Output();
  EXPECT_EQ(MetricValue(relay->admin_port(), kUnreachable), 0.0);

  broker.Stop();
  const auto during = WriteChargeEvents(fixture.db().url(), 100, 2);
  ASSERT_TRUE(Eventually([&] { return MetricValue(relay->admin_port(), kUnreachable) == 1.0; }, 30s))
      << relay->Output();
  EXPECT_EQ(MetricValue(relay->admin_port(), "outbox_kafka_stalled{cause=\"not_enough_replicas\"}"), 0.0);
  EXPECT_THAT(relay->Output(), HasSubstr("; kafka: brokers_unreachable: no metadata from any broker"));
  EXPECT_GT(Unpublished(fixture.db()), 0);

  broker.Start();
  const auto restarted = std::chrono::steady_clock::now();
  ASSERT_TRUE(Eventually([&] { return Unpublished(fixture.db()) == 0; }, 90s)) << relay->Output();
  std::cout << "caught up " << std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::steady_clock::now() - restarted).count()
            << " ms after the broker was back\n";
  EXPECT_TRUE(Eventually([&] { return MetricValue(relay->admin_port(), kUnreachable) == 0.0; }, 10s));
  EXPECT_TRUE(relay->process().Running());
  std::vector<WrittenEvent> all = before;
  all.insert(all.end(), during.begin(), during.end());
  const auto consumed = ConsumeAll(fixture.topic(), all, 60s);
  EXPECT_THAT(ContractViolations(consumed, all), IsEmpty());
}

}  // namespace
}  // namespace charge_outbox::testing
