// RdKafkaPublisher against the test broker, read back with a real consumer: a batch arrives with its keys,
// values and headers in order per key; a message too large is refused permanently without holding the
// others back; the topic is created when missing and left alone when present; the properties the relay's
// guarantees rest on cannot be configured away.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "charge_outbox/kafka/event_publisher.hpp"
#include "kafka_test_topic.hpp"
#include "test_env.hpp"

namespace charge_outbox::kafka {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using testing::KafkaTestTopic;

std::unique_ptr<EventPublisher> Publisher(const std::string& topic, std::map<std::string, std::string> props = {}) {
  return MakeRdKafkaPublisher({.bootstrap_servers = testing::KafkaBootstrapServers(), .topic = topic, .properties = props});
}

TEST(RdKafkaPublisherTest, DeliversABatchWithKeysValuesAndHeaders) {
  KafkaTestTopic topic("publisher", 3);
  auto publisher = Publisher(topic.name());
  // Messages are views: what they refer to lives here until PublishBatch returns.
  std::vector<std::string> keys, values, ids;
  for (int i = 0; i < 50; ++i) {
    keys.push_back("ch_" + std::to_string(i % 5));
    values.push_back(R"({"n": )" + std::to_string(i) + "}");
    ids.push_back("id-" + std::to_string(i));
  }
  std::vector<Message> batch;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    batch.push_back(Message{.key = keys[i], .value = values[i],
                            .headers = {{"ce_id", ids[i]}, {"content-type", "application/json"}}});
  }
  std::atomic<bool> cancel{false};
  const auto results = publisher->PublishBatch(batch, cancel);
  ASSERT_EQ(results.size(), batch.size());
  for (const auto& r : results) EXPECT_EQ(r.status, DeliveryStatus::kDelivered) << r.error;

  const auto consumed = topic.Consume(batch.size(), 30s);
  ASSERT_EQ(consumed.size(), batch.size());
  std::map<std::string, int> last_n;
  std::map<std::string, int> partition_of;
  for (const auto& m : consumed) {
    const int n = std::stoi(m.value.substr(6));
    EXPECT_EQ(m.key, "ch_" + std::to_string(n % 5));
    EXPECT_EQ(m.headers.at("ce_id"), "id-" + std::to_string(n));
    EXPECT_EQ(m.headers.at("content-type"), "application/json");
    if (last_n.contains(m.key)) {
      EXPECT_GT(n, last_n[m.key]) << "order per key";
    }
    last_n[m.key] = n;
    // One key, one partition.
    if (partition_of.contains(m.key)) {
      EXPECT_EQ(partition_of[m.key], m.partition);
    }
    partition_of[m.key] = m.partition;
  }
}

TEST(RdKafkaPublisherTest, AMessageTooLargeIsRefusedPermanentlyAndTheOthersAreDelivered) {
  KafkaTestTopic topic("publisher_large", 1);
  auto publisher = Publisher(topic.name(), {{"message.max.bytes", "100000"}});
  const std::string too_large(200'000, 'x');
  std::vector<Message> batch{{.key = "a", .value = "small one", .headers = {}},
                             {.key = "b", .value = too_large, .headers = {}},
                             {.key = "c", .value = "small two", .headers = {}}};
  std::atomic<bool> cancel{false};
  const auto results = publisher->PublishBatch(batch, cancel);
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[0].status, DeliveryStatus::kDelivered) << results[0].error;
  EXPECT_EQ(results[1].status, DeliveryStatus::kPermanent);
  EXPECT_THAT(results[1].error, HasSubstr("MSG_SIZE_TOO_LARGE"));
  EXPECT_EQ(results[2].status, DeliveryStatus::kDelivered) << results[2].error;
  const auto consumed = topic.Consume(2, 30s);
  ASSERT_EQ(consumed.size(), 2u);
  EXPECT_EQ(consumed[0].value, "small one");
  EXPECT_EQ(consumed[1].value, "small two");
}

TEST(RdKafkaPublisherTest, EnsureTopicCreatesAMissingTopicAndAcceptsAnExistingOne) {
  const auto name = testing::UniqueName("publisher_created");
  auto publisher = Publisher(name);
  EXPECT_EQ(publisher->EnsureTopic(2, 1, 10s).code, TopicErrc::kNone);
  EXPECT_EQ(publisher->EnsureTopic(2, 1, 10s).code, TopicErrc::kNone);
  // A replication factor the single test broker cannot give is refused, not retried forever.
  auto other = Publisher(testing::UniqueName("publisher_refused"));
  const auto refused = other->EnsureTopic(1, 3, 10s);
  EXPECT_EQ(refused.code, TopicErrc::kRefused) << refused.detail;
  std::atomic<bool> cancel{false};
  const auto results = publisher->PublishBatch({{.key = "k", .value = "v", .headers = {}}}, cancel);
  EXPECT_EQ(results.at(0).status, DeliveryStatus::kDelivered) << results.at(0).error;
}

TEST(RdKafkaPublisherTest, PropertiesTheGuaranteesRestOnCannotBeChanged) {
  EXPECT_THROW(Publisher("t", {{"enable.idempotence", "false"}}), KafkaConfigError);
  EXPECT_THROW(Publisher("t", {{"acks", "1"}}), KafkaConfigError);
  EXPECT_THROW(Publisher("t", {{"partitioner", "consistent_random"}}), KafkaConfigError);
  EXPECT_THROW(Publisher("t", {{"no.such.property", "1"}}), KafkaConfigError);
  EXPECT_NO_THROW(Publisher("t", {{"acks", "all"}, {"compression.type", "lz4"}}));
}

TEST(RdKafkaPublisherTest, CancellingAbandonsMessagesWithoutAReport) {
  // Nothing listens on port 1: no message can be delivered, so every one is abandoned on cancel.
  auto publisher = MakeRdKafkaPublisher({.bootstrap_servers = "127.0.0.1:1", .topic = "nowhere", .properties = {}});
  std::atomic<bool> cancel{false};
  std::thread canceller([&] {
    std::this_thread::sleep_for(300ms);  // the cancel must arrive while the batch waits: that is the case tested
    cancel = true;
  });
  const auto results = publisher->PublishBatch({{.key = "k", .value = "v", .headers = {}}}, cancel);
  canceller.join();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].status, DeliveryStatus::kAbandoned);
}

}  // namespace
}  // namespace charge_outbox::kafka
