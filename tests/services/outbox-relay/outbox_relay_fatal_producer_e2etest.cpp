// A fatal producer error mid-stream (what librdkafka 2.0.2's idempotent producer may raise after a broker
// loss: OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID, an epoch fence), injected through librdkafka's
// test hook by the relay.producer_fatal_error failpoint while a few hundred charges' events are being
// written: the relay recreates its producer and stays up, every event arrives at least once, no charge's
// events arrive out of order, the outbox ends fully published, and the recreation is counted.
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

TEST(OutboxRelayFatalProducerE2E, AFatalProducerErrorMidStreamRecreatesTheProducerWithoutLossOrReorder) {
  RelayE2E fixture("FatalProducerError");
  auto relay = fixture.StartRelay({{"FAILPOINTS", "relay.producer_fatal_error=error"}});
  const auto started = std::chrono::steady_clock::now();
  // Written while the relay runs (from 4 connections, each charge's events in separate transactions),
  // so that the error cuts a stream, not one backlog batch.
  const auto written = WriteChargeEvents(fixture.db().url(), 300, 4);
  ASSERT_TRUE(Eventually([&] { return Unpublished(fixture.db()) == 0; }, 90s)) << relay->Output();
  const auto drained = std::chrono::steady_clock::now() - started;

  // The relay did not exit: it recreated its producer once, and said so in one line naming the error.
  EXPECT_TRUE(relay->process().Running()) << relay->Output();
  EXPECT_EQ(MetricValue(relay->admin_port(), "outbox_producer_recreations_total"), 1.0) << relay->Output();
  EXPECT_THAT(relay->Output(), HasSubstr("kafka producer fatal error: OUT_OF_ORDER_SEQUENCE_NUMBER: "
                                         "test_fatal_error: injected by the relay.producer_fatal_error failpoint; producer recreated"));

  const auto consumed = ConsumeAll(fixture.topic(), written, 60s);
  EXPECT_THAT(ContractViolations(consumed, written), IsEmpty());
  EXPECT_EQ(MetricValue(relay->admin_port(), "outbox_events_published_total"), static_cast<double>(written.size()));
  std::cout << written.size() << " events, " << consumed.size() << " messages on the topic ("
            << consumed.size() - written.size() << " sent twice), drained in "
            << std::chrono::duration_cast<std::chrono::milliseconds>(drained).count() << " ms\n";
  const auto output = relay->Output();
  const auto line = output.find("producer recreated");
  if (line != std::string::npos) std::cout << output.substr(line, output.find('"', line) - line) << "\n";
}

}  // namespace
}  // namespace charge_outbox::testing
