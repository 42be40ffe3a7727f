// The local broker really stores and serves messages through librdkafka: the ground every relay
// test stands on.
#include <gtest/gtest.h>

#include "kafka_test_topic.hpp"

namespace charge_outbox::testing {
namespace {

TEST(KafkaRoundTrip, ProducedMessageIsConsumedWithKeyValueAndHeaders) {
  KafkaTestTopic topic("roundtrip");
  topic.Produce("charge-1", R"({"sequence":1})", {{"ce_type", "payments.charge.initiated.v1"}});
  topic.Produce("charge-1", R"({"sequence":2})", {{"ce_type", "payments.charge.captured.v1"}});

  const auto messages = topic.Consume(2, std::chrono::seconds{30});
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_EQ(messages[0].key, "charge-1");
  EXPECT_EQ(messages[0].value, R"({"sequence":1})");
  EXPECT_EQ(messages[0].headers.at("ce_type"), "payments.charge.initiated.v1");
  // Same key, same partition, in the order produced.
  EXPECT_EQ(messages[1].partition, messages[0].partition);
  EXPECT_EQ(messages[1].offset, messages[0].offset + 1);
  EXPECT_EQ(messages[1].headers.at("ce_type"), "payments.charge.captured.v1");
}

}  // namespace
}  // namespace charge_outbox::testing
