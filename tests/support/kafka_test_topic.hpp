// A Kafka topic of its own for one test, on the broker `tests/run` started, with a real producer and a
// real consumer (librdkafka) to write and read it back.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace charge_outbox::testing {

struct ConsumedMessage {
  std::string key;
  std::string value;
  std::map<std::string, std::string> headers;
  int partition = -1;
  long long offset = -1;
};

// Reads `topic` on `bootstrap_servers` from the beginning with a fresh consumer group until `count`
// messages arrived or `timeout` passed; returns what arrived.
std::vector<ConsumedMessage> ConsumeTopic(const std::string& bootstrap_servers, const std::string& topic,
                                          std::size_t count, std::chrono::milliseconds timeout);
// The same, until `done(message)` (called for each message as it arrives) says enough, or `timeout`.
std::vector<ConsumedMessage> ConsumeTopicUntil(const std::string& bootstrap_servers, const std::string& topic,
                                               const std::function<bool(const ConsumedMessage&)>& done,
                                               std::chrono::milliseconds timeout);

class KafkaTestTopic {
 public:
  // Creates a uniquely named topic; throws if the broker does not confirm it.
  explicit KafkaTestTopic(const std::string& prefix, int partitions = 3);

  const std::string& name() const { return name_; }
  const std::string& bootstrap_servers() const { return bootstrap_; }

  // Produces one message with acks=all and waits for its delivery report; throws on failure. The record's
  // timestamp (CreateTime) is `timestamp`, to the millisecond, or the time of the call.
  void Produce(const std::string& key, const std::string& value,
               const std::map<std::string, std::string>& headers = {},
               std::optional<std::chrono::system_clock::time_point> timestamp = std::nullopt) const;

  // Reads from the beginning with a fresh consumer group until `count` messages arrived or `timeout`
  // passed; returns what arrived (the caller asserts on the count).
  std::vector<ConsumedMessage> Consume(std::size_t count, std::chrono::milliseconds timeout) const;

 private:
  std::string bootstrap_;
  std::string name_;
};

}  // namespace charge_outbox::testing
