// RdKafkaPublisher: EventPublisher over librdkafka's C API (Debian 12 ships 2.0.2).
//
// A message counts as delivered only when its delivery report has no error and says PERSISTED. A report
// with an error may still belong to a message the broker wrote (a timeout after sending): it stays
// unpublished and is sent again, which is a duplicate at worst, never a loss.
#include <librdkafka/rdkafka.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string_view>

#include "charge_outbox/failpoints/failpoints.hpp"
#include "charge_outbox/kafka/event_publisher.hpp"

namespace charge_outbox::kafka {
namespace {

// Properties the relay's guarantees rest on; configuration may repeat them but not change them.
const std::map<std::string, std::string> kEnforced = {
    {"enable.idempotence", "true"},  // librdkafka 2.0 defaults to false: no duplicates from its own retries
    {"acks", "all"},                 // persisted on every in-sync replica before the report says so
    {"partitioner", "murmur2_random"},  // the Java client's key -> partition mapping
};

// After a fatal error, how long PublishBatch still waits for the reports of the requests in flight.
constexpr std::chrono::milliseconds kFatalSettle{1000};

bool IsPermanent(rd_kafka_resp_err_t err) {
  // Errors about the message itself: sending it again gives the same answer.
  return err == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE || err == RD_KAFKA_RESP_ERR_INVALID_MSG ||
         err == RD_KAFKA_RESP_ERR_INVALID_MSG_SIZE || err == RD_KAFKA_RESP_ERR_INVALID_RECORD;
}

DeliveryResult Classify(rd_kafka_resp_err_t err, rd_kafka_msg_status_t status) {
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR) {
    if (status == RD_KAFKA_MSG_STATUS_PERSISTED) return {DeliveryStatus::kDelivered, ""};
    return {DeliveryStatus::kNotDelivered, "delivery report without error but not persisted"};
  }
  std::string text = std::string(rd_kafka_err2name(err)) + ": " + rd_kafka_err2str(err);
  if (err == RD_KAFKA_RESP_ERR__FATAL) return {DeliveryStatus::kFatal, std::move(text)};
  if (IsPermanent(err)) return {DeliveryStatus::kPermanent, std::move(text)};
  if (status == RD_KAFKA_MSG_STATUS_POSSIBLY_PERSISTED) text += " (possibly persisted: will be sent again)";
  return {DeliveryStatus::kNotDelivered, std::move(text)};
}

class RdKafkaPublisher final : public EventPublisher {
 public:
  explicit RdKafkaPublisher(RdKafkaOptions options) : options_(std::move(options)) { Create(); }

  ~RdKafkaPublisher() override { Destroy(); }

  void Recreate() override {
    Destroy();
    {
      std::lock_guard lock(mutex_);
      fatal_reason_.clear();
      fatal_ = false;
    }
    Create();
  }

  std::vector<DeliveryResult> PublishBatch(const std::vector<Message>& messages, const std::atomic<bool>& cancel,
                                           const std::function<void()>& still_waiting) override {
    // The topic handle is made on first use, after EnsureTopic: making it starts metadata requests.
    if (topic_ == nullptr) topic_ = rd_kafka_topic_new(rk_, options_.topic.c_str(), nullptr);
    ++batch_;
    results_.assign(messages.size(), DeliveryResult{DeliveryStatus::kAbandoned, "no delivery report"});
    reported_.assign(messages.size(), false);
    remaining_ = messages.size();
    const auto deadline = options_.delivery_deadline.count() > 0
                              ? std::chrono::steady_clock::now() + options_.delivery_deadline
                              : std::chrono::steady_clock::time_point::max();
    auto waiting = [&] {
      return !cancel.load() && !CheckFatal() && std::chrono::steady_clock::now() < deadline;
    };
    for (std::size_t i = 0; i < messages.size(); ++i) {
      const auto& m = messages[i];
      while (true) {
        const auto err = Produce(m, i);
        if (err == RD_KAFKA_RESP_ERR_NO_ERROR) break;
        if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL && waiting()) {
          rd_kafka_poll(rk_, 100);  // serves delivery reports, which frees queue space
          still_waiting();
          continue;
        }
        Report(i, Classify(err, RD_KAFKA_MSG_STATUS_NOT_PERSISTED));
        break;
      }
    }
    MaybeInjectFatalError();
    // flush, not poll: it serves the reports the same way, and it sends what lingers at once (linger.ms is
    // ignored while it runs), so linger.ms batches the burst of produce calls without delaying its tail.
    while (remaining_ > 0 && waiting()) {
      rd_kafka_flush(rk_, 100);
      if (remaining_ > 0) still_waiting();
    }
    if (remaining_ > 0 && !cancel.load() && !fatal()) {
      // The deadline passed: what is still queued (never sent) is dropped, so that it does not go out
      // late beside the next batch's copy; what is in flight is left to librdkafka (purging it would
      // break the idempotent producer's sequence). Their late reports belong to this batch: ignored.
      rd_kafka_purge(rk_, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_NON_BLOCKING);
      const std::string why =
          "no delivery report within the delivery deadline (" + std::to_string(options_.delivery_deadline.count()) +
          "ms): kafka.message_timeout + kafka.socket_timeout";
      for (std::size_t i = 0; i < results_.size(); ++i) {
        if (!reported_[i]) results_[i] = {DeliveryStatus::kAbandoned, why};
      }
    }
    if (CheckFatal()) {
      // What was in flight may still be reported persisted (librdkafka purges its queues at a fatal error
      // but lets the requests already sent finish): wait a moment for those, which are then not sent again.
      const auto settle = std::chrono::steady_clock::now() + kFatalSettle;
      while (remaining_ > 0 && !cancel.load() && std::chrono::steady_clock::now() < settle) rd_kafka_flush(rk_, 100);
      for (std::size_t i = 0; i < results_.size(); ++i) {
        if (!reported_[i]) results_[i] = {DeliveryStatus::kFatal, fatal_reason()};
      }
    }
    return results_;
  }

  TopicResult EnsureTopic(int partitions, int replication_factor, std::chrono::milliseconds timeout) override {
    char err[512];
    rd_kafka_NewTopic_t* topic =
        rd_kafka_NewTopic_new(options_.topic.c_str(), partitions, replication_factor, err, sizeof err);
    if (topic == nullptr) return {TopicErrc::kRefused, err};
    rd_kafka_AdminOptions_t* admin_options = rd_kafka_AdminOptions_new(rk_, RD_KAFKA_ADMIN_OP_CREATETOPICS);
    rd_kafka_AdminOptions_set_request_timeout(admin_options, static_cast<int>(timeout.count()), err, sizeof err);
    rd_kafka_queue_t* queue = rd_kafka_queue_new(rk_);
    rd_kafka_CreateTopics(rk_, &topic, 1, admin_options, queue);
    rd_kafka_event_t* event = rd_kafka_queue_poll(queue, static_cast<int>(timeout.count()) + 1000);
    TopicResult result;
    if (event == nullptr) {
      result = {TopicErrc::kUnavailable, "no answer from the brokers"};
    } else if (const auto e = rd_kafka_event_error(event); e != RD_KAFKA_RESP_ERR_NO_ERROR) {
      result = {TopicErrc::kUnavailable, rd_kafka_event_error_string(event)};
    } else {
      std::size_t n = 0;
      const auto* created = rd_kafka_event_CreateTopics_result(event);
      const auto** topics = rd_kafka_CreateTopics_result_topics(created, &n);
      for (std::size_t i = 0; i < n; ++i) {
        const auto te = rd_kafka_topic_result_error(topics[i]);
        if (te == RD_KAFKA_RESP_ERR_NO_ERROR || te == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) continue;
        const char* text = rd_kafka_topic_result_error_string(topics[i]);
        const std::string detail = std::string(rd_kafka_err2name(te)) + ": " + (text != nullptr ? text : "");
        const bool transient = te == RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT || te == RD_KAFKA_RESP_ERR__TIMED_OUT ||
                               te == RD_KAFKA_RESP_ERR__TRANSPORT || te == RD_KAFKA_RESP_ERR_NOT_CONTROLLER ||
                               te == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN;
        result = {transient ? TopicErrc::kUnavailable : TopicErrc::kRefused, detail};
      }
    }
    if (event != nullptr) rd_kafka_event_destroy(event);
    rd_kafka_queue_destroy(queue);
    rd_kafka_AdminOptions_destroy(admin_options);
    rd_kafka_NewTopic_destroy(topic);
    return result;
  }

  StallReport DiagnoseStall(std::chrono::milliseconds timeout) override {
    if (topic_ == nullptr) topic_ = rd_kafka_topic_new(rk_, options_.topic.c_str(), nullptr);
    const int ms = static_cast<int>(timeout.count());
    const rd_kafka_metadata_t* md = nullptr;
    if (const auto err = rd_kafka_metadata(rk_, 0, topic_, &md, ms); err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      return {StallCause::kBrokersUnreachable, std::string("no metadata from any broker: ") + rd_kafka_err2name(err) +
                                                   ": " + rd_kafka_err2str(err)};
    }
    // What the metadata says, not what is: a broker that lost its controller quorum (two of three combined
    // nodes gone) keeps serving the leaders and ISRs it last had, none of them moved or shrunk.
    constexpr std::string_view kMaybeStale = "; it may be stale if the cluster lost its controller quorum";
    StallReport report{StallCause::kUnknown,
                       "the metadata shows every partition with a leader and enough in-sync replicas" +
                           std::string(kMaybeStale)};
    // Kafka 3.7 and later (KIP-966) require min(min.insync.replicas, replication factor) in sync; the
    // comparison below takes the same minimum per partition.
    const int min_isr = MinInsyncReplicas(ms);
    if (md->topic_cnt < 1 || md->topics[0].err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      const auto err = md->topic_cnt < 1 ? RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART : md->topics[0].err;
      report.detail = std::string("topic ") + options_.topic + ": " + rd_kafka_err2name(err);
    } else {
      const auto& topic = md->topics[0];
      for (int i = 0; i < topic.partition_cnt && report.cause != StallCause::kNoLeader; ++i) {
        const auto& p = topic.partitions[i];
        const std::string partition = "partition " + std::to_string(p.id);
        if (p.leader < 0 || p.err == RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE) {
          report = {StallCause::kNoLeader, partition + " has no leader"};
        } else if (report.cause == StallCause::kUnknown && min_isr > 0 &&
                   p.isr_cnt < std::min(min_isr, p.replica_cnt)) {
          report = {StallCause::kNotEnoughReplicas, partition + " has " + std::to_string(p.isr_cnt) + " of " +
                                                        std::to_string(p.replica_cnt) +
                                                        " replicas in sync, below min.insync.replicas " +
                                                        std::to_string(min_isr)};
        } else if (report.cause == StallCause::kUnknown && min_isr <= 0 && p.isr_cnt < p.replica_cnt) {
          report.detail = partition + " has " + std::to_string(p.isr_cnt) + " of " + std::to_string(p.replica_cnt) +
                          " replicas in sync (min.insync.replicas unknown: DescribeConfigs refused or timed out)" +
                          std::string(kMaybeStale);
        }
      }
    }
    rd_kafka_metadata_destroy(md);
    return report;
  }

  bool fatal() const override { return fatal_.load(); }

  std::string fatal_reason() const override {
    std::lock_guard lock(mutex_);
    return fatal_reason_;
  }

 private:
  void Create() {
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    char err[512];
    auto set = [&](const std::string& key, const std::string& value) {
      if (rd_kafka_conf_set(conf, key.c_str(), value.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK) {
        rd_kafka_conf_destroy(conf);
        throw KafkaConfigError("kafka property " + key + ": " + err);
      }
    };
    // The relay creates its topic with the configured partitions; a metadata request must not create it
    // first with the broker's defaults (configuration may turn this back on).
    set("allow.auto.create.topics", "false");
    for (const auto& [key, value] : options_.properties) {
      if (const auto it = kEnforced.find(key); it != kEnforced.end() && it->second != value) {
        rd_kafka_conf_destroy(conf);
        throw KafkaConfigError("kafka property " + key + " must be " + it->second +
                               " (the relay's ordering and delivery guarantees depend on it); remove it");
      }
      set(key, value);
    }
    set("bootstrap.servers", options_.bootstrap_servers);
    for (const auto& [key, value] : kEnforced) set(key, value);
    rd_kafka_conf_set_opaque(conf, this);
    rd_kafka_conf_set_dr_msg_cb(conf, &RdKafkaPublisher::OnDelivery);
    rd_kafka_conf_set_error_cb(conf, &RdKafkaPublisher::OnError);
    rk_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (rk_ == nullptr) {
      rd_kafka_conf_destroy(conf);
      throw KafkaConfigError(std::string("kafka producer: ") + err);
    }
  }

  void Destroy() {
    // Whatever is still queued belongs to an abandoned batch: its rows are unpublished and will be sent
    // again (by this loop after Recreate, or by whoever owns the shard next), so dropping it loses nothing.
    rd_kafka_purge(rk_, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
    rd_kafka_flush(rk_, 2000);
    if (topic_ != nullptr) rd_kafka_topic_destroy(topic_);
    topic_ = nullptr;
    rd_kafka_destroy(rk_);
    rk_ = nullptr;
  }

  // The relay.producer_fatal_error failpoint (docs/failpoints.md): once per process, in the second batch
  // of the first producer (one batch already delivered), once its messages are produced and before their
  // reports are awaited, the producer raises a fatal error as librdkafka would after a broker loss
  // (OUT_OF_ORDER_SEQUENCE_NUMBER), through librdkafka's test hook.
  void MaybeInjectFatalError() {
    static std::atomic<bool> injected{false};
    if (batch_ != 2 || injected.load() || !failpoints::Hit("relay.producer_fatal_error")) return;
    if (injected.exchange(true)) return;
    rd_kafka_test_fatal_error(rk_, RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER,
                              "injected by the relay.producer_fatal_error failpoint");
  }

  rd_kafka_resp_err_t Produce(const Message& m, std::size_t index) {
    rd_kafka_headers_t* headers = rd_kafka_headers_new(m.headers.size());
    for (const auto& [name, value] : m.headers) {
      rd_kafka_header_add(headers, name.data(), static_cast<ssize_t>(name.size()), value.data(),
                          static_cast<ssize_t>(value.size()));
    }
    // The batch number travels with the message, so a late report from an abandoned batch is recognised.
    const auto tag = (static_cast<std::uintptr_t>(batch_) << 32) | static_cast<std::uintptr_t>(index);
    // librdkafka's RD_KAFKA_V_* macros are C casts; they are its public API.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wold-style-cast"
    const auto err = rd_kafka_producev(
        rk_, RD_KAFKA_V_RKT(topic_), RD_KAFKA_V_PARTITION(RD_KAFKA_PARTITION_UA),
        RD_KAFKA_V_KEY(const_cast<char*>(m.key.data()), m.key.size()),
        RD_KAFKA_V_VALUE(const_cast<char*>(m.value.data()), m.value.size()), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
        RD_KAFKA_V_HEADERS(headers), RD_KAFKA_V_OPAQUE(reinterpret_cast<void*>(tag)), RD_KAFKA_V_END);
#pragma GCC diagnostic pop
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) rd_kafka_headers_destroy(headers);  // owned by us on failure
    return err;
  }

  void Report(std::size_t index, DeliveryResult result) {
    if (index >= reported_.size() || reported_[index]) return;
    reported_[index] = true;
    results_[index] = std::move(result);
    --remaining_;
  }

  static void OnDelivery(rd_kafka_t*, const rd_kafka_message_t* message, void* opaque) {
    auto* self = static_cast<RdKafkaPublisher*>(opaque);
    const auto tag = reinterpret_cast<std::uintptr_t>(message->_private);
    if ((tag >> 32) != (self->batch_ & 0xFFFFFFFFu)) return;  // an abandoned batch's message
    self->Report(static_cast<std::size_t>(tag & 0xFFFFFFFFu), Classify(message->err, rd_kafka_message_status(message)));
  }

  // The topic's min.insync.replicas (DescribeConfigs), or -1 if the cluster did not say.
  int MinInsyncReplicas(int timeout_ms) {
    char err[512];
    rd_kafka_ConfigResource_t* resource = rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, options_.topic.c_str());
    rd_kafka_AdminOptions_t* admin_options = rd_kafka_AdminOptions_new(rk_, RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS);
    rd_kafka_AdminOptions_set_request_timeout(admin_options, timeout_ms, err, sizeof err);
    rd_kafka_queue_t* queue = rd_kafka_queue_new(rk_);
    rd_kafka_DescribeConfigs(rk_, &resource, 1, admin_options, queue);
    rd_kafka_event_t* event = rd_kafka_queue_poll(queue, timeout_ms + 1000);
    int value = -1;
    if (event != nullptr && rd_kafka_event_error(event) == RD_KAFKA_RESP_ERR_NO_ERROR) {
      std::size_t n = 0;
      const auto** resources =
          rd_kafka_DescribeConfigs_result_resources(rd_kafka_event_DescribeConfigs_result(event), &n);
      for (std::size_t i = 0; i < n; ++i) {
        std::size_t m = 0;
        const auto** entries = rd_kafka_ConfigResource_configs(resources[i], &m);
        for (std::size_t j = 0; j < m; ++j) {
          const char* text = rd_kafka_ConfigEntry_value(entries[j]);
          if (std::string_view(rd_kafka_ConfigEntry_name(entries[j])) == "min.insync.replicas" && text != nullptr) {
            value = std::atoi(text);
          }
        }
      }
    }
    if (event != nullptr) rd_kafka_event_destroy(event);
    rd_kafka_queue_destroy(queue);
    rd_kafka_AdminOptions_destroy(admin_options);
    rd_kafka_ConfigResource_destroy(resource);
    return value;
  }

  // Whether the producer has a fatal error, asking librdkafka itself: its error callback comes with a later
  // poll, after the delivery reports of the messages the error purged, so the batch they belong to would
  // not know. The caller logs the error once, with what it does about it.
  bool CheckFatal() {
    if (fatal_.load()) return true;
    char text[512];
    const auto original = rd_kafka_fatal_error(rk_, text, sizeof text);
    if (original == RD_KAFKA_RESP_ERR_NO_ERROR) return false;
    std::lock_guard lock(mutex_);
    fatal_reason_ = std::string(rd_kafka_err2name(original)) + ": " + text;
    fatal_ = true;
    return true;
  }

  static void OnError(rd_kafka_t*, int err, const char* reason, void* opaque) {
    auto* self = static_cast<RdKafkaPublisher*>(opaque);
    if (err == RD_KAFKA_RESP_ERR__FATAL) {
      self->CheckFatal();
      return;
    }
    // Transport errors while a broker is down come here repeatedly; librdkafka retries by itself.
    spdlog::warn("kafka: {}: {}", rd_kafka_err2name(static_cast<rd_kafka_resp_err_t>(err)), reason);
  }

  RdKafkaOptions options_;
  rd_kafka_t* rk_ = nullptr;
  rd_kafka_topic_t* topic_ = nullptr;
  std::uint64_t batch_ = 0;
  std::vector<DeliveryResult> results_;
  std::vector<bool> reported_;
  std::size_t remaining_ = 0;
  std::atomic<bool> fatal_{false};
  mutable std::mutex mutex_;
  std::string fatal_reason_;
};

}  // namespace

retry::Retryability RetryabilityOf(DeliveryStatus status) {
  switch (status) {
    case DeliveryStatus::kDelivered: return retry::Retryability::kDefinitive;
    case DeliveryStatus::kNotDelivered:
    case DeliveryStatus::kAbandoned:
    case DeliveryStatus::kFatal: return retry::Retryability::kTransient;
    case DeliveryStatus::kPermanent: return retry::Retryability::kNever;
  }
  return retry::Retryability::kNever;
}

std::string_view StallCauseName(StallCause cause) {
  switch (cause) {
    case StallCause::kNone: return "none";
    case StallCause::kBrokersUnreachable: return "brokers_unreachable";
    case StallCause::kNoLeader: return "no_leader";
    case StallCause::kNotEnoughReplicas: return "not_enough_replicas";
    case StallCause::kUnknown: return "unknown";
  }
  return "unknown";
}

std::unique_ptr<EventPublisher> MakeRdKafkaPublisher(RdKafkaOptions options) {
  return std::make_unique<RdKafkaPublisher>(std::move(options));
}

std::string LibraryVersion() { return rd_kafka_version_str(); }

}  // namespace charge_outbox::kafka
