// Kafka clients for the latency benchmarks (header-only: benchmarks link no bench library). LatestConsumer
// reads a topic from its end: subscribed in a fresh group, and returned once it owns its partitions and its
// fetchers stand at the end, so that everything written afterwards is seen; they create it before their
// first write.
#pragma once

#include <librdkafka/rdkafka.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace charge_outbox::bench {

// A librdkafka client of `type` with these properties; throws naming the property it refused.
inline rd_kafka_t* NewClient(rd_kafka_type_t type, const std::vector<std::pair<std::string, std::string>>& properties) {
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  for (const auto& [k, v] : properties) {
    if (rd_kafka_conf_set(conf, k.c_str(), v.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK) {
      rd_kafka_conf_destroy(conf);
      throw std::runtime_error(k + ": " + err);
    }
  }
  rd_kafka_t* client = rd_kafka_new(type, conf, err, sizeof err);
  if (client == nullptr) throw std::runtime_error(err);
  return client;
}

inline rd_kafka_t* LatestConsumer(const std::string& bootstrap, const std::string& topic, const std::string& group) {
  rd_kafka_t* consumer = NewClient(RD_KAFKA_CONSUMER, {{"bootstrap.servers", bootstrap},
                                                       {"group.id", group},
                                                       {"auto.offset.reset", "latest"},
                                                       {"enable.auto.commit", "false"},
                                                       {"fetch.wait.max.ms", "5"},
                                                       {"socket.nagle.disable", "true"}});
  rd_kafka_poll_set_consumer(consumer);
  auto* subscription = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(subscription, topic.c_str(), RD_KAFKA_PARTITION_UA);
  rd_kafka_subscribe(consumer, subscription);
  rd_kafka_topic_partition_list_destroy(subscription);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{30};
  while (std::chrono::steady_clock::now() < deadline) {
    if (rd_kafka_message_t* m = rd_kafka_consumer_poll(consumer, 100)) rd_kafka_message_destroy(m);
    rd_kafka_topic_partition_list_t* assigned = nullptr;
    rd_kafka_assignment(consumer, &assigned);
    const bool ready = assigned != nullptr && assigned->cnt > 0;
    if (assigned != nullptr) rd_kafka_topic_partition_list_destroy(assigned);
    if (ready) break;
  }
  for (int i = 0; i < 10; ++i) {  // a few polls more, so that the fetchers stand at the end
    if (rd_kafka_message_t* m = rd_kafka_consumer_poll(consumer, 100)) rd_kafka_message_destroy(m);
  }
  return consumer;
}

}  // namespace charge_outbox::bench
