#include "kafka_test_topic.hpp"

#include <librdkafka/rdkafka.h>

#include <cstdint>
#include <memory>
#include <stdexcept>

#include "test_env.hpp"

namespace charge_outbox::testing {
namespace {

struct KafkaDeleter {
  void operator()(rd_kafka_t* rk) const { rd_kafka_destroy(rk); }
};
using KafkaHandle = std::unique_ptr<rd_kafka_t, KafkaDeleter>;

KafkaHandle MakeClient(rd_kafka_type_t type, const std::map<std::string, std::string>& settings) {
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  char err[512];
  for (const auto& [k, v] : settings) {
    if (rd_kafka_conf_set(conf, k.c_str(), v.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK) {
      rd_kafka_conf_destroy(conf);
      throw std::runtime_error("kafka config " + k + ": " + err);
    }
  }
  rd_kafka_t* rk = rd_kafka_new(type, conf, err, sizeof err);  // takes ownership of conf on success
  if (rk == nullptr) {
    rd_kafka_conf_destroy(conf);
    throw std::runtime_error(std::string("rd_kafka_new: ") + err);
  }
  return KafkaHandle(rk);
}

}  // namespace

KafkaTestTopic::KafkaTestTopic(const std::string& prefix, int partitions)
    : bootstrap_(KafkaBootstrapServers()), name_(UniqueName(prefix)) {
  auto admin = MakeClient(RD_KAFKA_PRODUCER, {{"bootstrap.servers", bootstrap_}});
  char err[512];
  rd_kafka_NewTopic_t* topic = rd_kafka_NewTopic_new(name_.c_str(), partitions, 1, err, sizeof err);
  if (topic == nullptr) throw std::runtime_error(std::string("NewTopic: ") + err);
  rd_kafka_queue_t* queue = rd_kafka_queue_new(admin.get());
  rd_kafka_CreateTopics(admin.get(), &topic, 1, nullptr, queue);
  rd_kafka_event_t* event = rd_kafka_queue_poll(queue, 30'000);
  std::string failure;
  if (event == nullptr) {
    failure = "no answer from the broker within 30s";
  } else if (rd_kafka_event_error(event) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    failure = rd_kafka_event_error_string(event);
  } else {
    size_t n = 0;
    const auto* result = rd_kafka_event_CreateTopics_result(event);
    const auto** topics = rd_kafka_CreateTopics_result_topics(result, &n);
    for (size_t i = 0; i < n; ++i) {
      if (rd_kafka_topic_result_error(topics[i]) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        failure = rd_kafka_topic_result_error_string(topics[i]);
      }
    }
  }
  if (event != nullptr) rd_kafka_event_destroy(event);
  rd_kafka_queue_destroy(queue);
  rd_kafka_NewTopic_destroy(topic);
  if (!failure.empty()) throw std::runtime_error("creating topic " + name_ + " failed: " + failure);
}

void KafkaTestTopic::Produce(const std::string& key, const std::string& value,
                             const std::map<std::string, std::string>& headers,
                             std::optional<std::chrono::system_clock::time_point> timestamp) const {
  auto producer = MakeClient(RD_KAFKA_PRODUCER, {{"bootstrap.servers", bootstrap_}, {"acks", "all"}});
  rd_kafka_headers_t* hdrs = rd_kafka_headers_new(headers.size());
  for (const auto& [k, v] : headers) {
    rd_kafka_header_add(hdrs, k.data(), static_cast<ssize_t>(k.size()), v.data(), static_cast<ssize_t>(v.size()));
  }
  // 0: librdkafka stamps the record when it is produced.
  const std::int64_t timestamp_ms =
      timestamp ? std::chrono::duration_cast<std::chrono::milliseconds>(timestamp->time_since_epoch()).count() : 0;
  // librdkafka's RD_KAFKA_V_* macros are C casts; they are its public API.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wold-style-cast"
  const auto err = rd_kafka_producev(producer.get(), RD_KAFKA_V_TOPIC(name_.c_str()),
                                     RD_KAFKA_V_KEY(const_cast<char*>(key.data()), key.size()),
                                     RD_KAFKA_V_VALUE(const_cast<char*>(value.data()), value.size()),
                                     RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_HEADERS(hdrs),
                                     RD_KAFKA_V_TIMESTAMP(timestamp_ms), RD_KAFKA_V_END);
#pragma GCC diagnostic pop
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    rd_kafka_headers_destroy(hdrs);
    throw std::runtime_error(std::string("produce: ") + rd_kafka_err2str(err));
  }
  if (rd_kafka_flush(producer.get(), 30'000) != RD_KAFKA_RESP_ERR_NO_ERROR || rd_kafka_outq_len(producer.get()) > 0) {
    throw std::runtime_error("message to " + name_ + " not delivered within 30s");
  }
}

std::vector<ConsumedMessage> KafkaTestTopic::Consume(std::size_t count, std::chrono::milliseconds timeout) const {
  return ConsumeTopic(bootstrap_, name_, count, timeout);
}

std::vector<ConsumedMessage> ConsumeTopic(const std::string& bootstrap_servers, const std::string& topic,
                                          std::size_t count, std::chrono::milliseconds timeout) {
  std::size_t arrived = 0;
  return ConsumeTopicUntil(bootstrap_servers, topic, [&](const ConsumedMessage&) { return ++arrived >= count; }, timeout);
}

std::vector<ConsumedMessage> ConsumeTopicUntil(const std::string& bootstrap_servers, const std::string& topic,
                                               const std::function<bool(const ConsumedMessage&)>& done,
                                               std::chrono::milliseconds timeout) {
  auto consumer = MakeClient(RD_KAFKA_CONSUMER, {{"bootstrap.servers", bootstrap_servers},
                                                 {"group.id", UniqueName("g_" + topic)},
                                                 {"auto.offset.reset", "earliest"},
                                                 {"enable.auto.commit", "false"}});
  rd_kafka_poll_set_consumer(consumer.get());
  rd_kafka_topic_partition_list_t* subscription = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(subscription, topic.c_str(), RD_KAFKA_PARTITION_UA);
  const auto sub_err = rd_kafka_subscribe(consumer.get(), subscription);
  rd_kafka_topic_partition_list_destroy(subscription);
  if (sub_err != RD_KAFKA_RESP_ERR_NO_ERROR) throw std::runtime_error(rd_kafka_err2str(sub_err));

  std::vector<ConsumedMessage> out;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool enough = false;
  while (!enough && std::chrono::steady_clock::now() < deadline) {
    rd_kafka_message_t* msg = rd_kafka_consumer_poll(consumer.get(), 100);
    if (msg == nullptr) continue;
    if (msg->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      ConsumedMessage m;
      if (msg->key != nullptr) m.key.assign(static_cast<const char*>(msg->key), msg->key_len);
      if (msg->payload != nullptr) m.value.assign(static_cast<const char*>(msg->payload), msg->len);
      m.partition = msg->partition;
      m.offset = msg->offset;
      rd_kafka_headers_t* hdrs = nullptr;
      if (rd_kafka_message_headers(msg, &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        const char* name = nullptr;
        const void* value = nullptr;
        size_t size = 0;
        for (size_t i = 0; rd_kafka_header_get_all(hdrs, i, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR; ++i) {
          m.headers[name] = value == nullptr ? "" : std::string(static_cast<const char*>(value), size);
        }
      }
      enough = done(m);
      out.push_back(std::move(m));
    }
    rd_kafka_message_destroy(msg);
  }
  rd_kafka_consumer_close(consumer.get());
  return out;
}

}  // namespace charge_outbox::testing
