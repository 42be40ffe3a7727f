// Event publisher: sends a batch of messages to a Kafka topic and says, message by message, whether the
// broker persisted it. RdKafkaPublisher is the librdkafka implementation; no librdkafka type crosses
// this header.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <stdexcept>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "charge_outbox/retry/retryability.hpp"

namespace charge_outbox::kafka {

// One message, as views: the caller keeps what they refer to alive until PublishBatch returns (librdkafka
// copies what it keeps), so that building a batch copies no key, value or header.
struct Message {
  std::string_view key;
  std::string_view value;
  std::vector<std::pair<std::string_view, std::string_view>> headers;
};

// What happened to one message. Only kDelivered means the broker persisted it; every other status leaves
// the message unpublished for the caller.
enum class DeliveryStatus {
  kDelivered,
  kNotDelivered,  // not persisted, or not known to be (timed out, broker unreachable, topic missing)
  kPermanent,     // the broker or client refuses this message itself (too large, invalid): sending again fails
  kFatal,         // the producer is unusable (rd_kafka_fatal_error): it must be recreated (Recreate)
  kAbandoned,     // the caller cancelled before a delivery report arrived: unknown, treat as not delivered
};

// What may be done with the message: delivered is kDefinitive; refused is kNever; every other status is
// kTransient, the message is sent again (after kFatal, by the recreated producer). The one
// place Kafka's transient statuses are listed.
retry::Retryability RetryabilityOf(DeliveryStatus status);

struct DeliveryResult {
  DeliveryStatus status = DeliveryStatus::kAbandoned;
  std::string error;  // empty when delivered
};

// Why messages are not being delivered, as far as the cluster's metadata tells (DiagnoseStall). A
// producer with acks=all retries NOT_ENOUGH_REPLICAS and a missing leader by itself until
// message.timeout.ms, then reports a plain timeout: the report alone does not name the cause.
enum class StallCause {
  kNone,                // delivered: nothing stalls
  kBrokersUnreachable,  // no broker answered a metadata request
  kNoLeader,            // a partition of the topic has no leader
  kNotEnoughReplicas,   // a partition has fewer in-sync replicas than the topic's min.insync.replicas
  kUnknown,             // the metadata shows nothing wrong (or could not say: DescribeConfigs refused)
};
// The metric label value of a cause (`brokers_unreachable`, ...); "none" for kNone.
std::string_view StallCauseName(StallCause cause);

struct StallReport {
  StallCause cause = StallCause::kNone;
  std::string detail;  // which partition, how many replicas in sync, the error
};

enum class TopicErrc { kNone, kUnavailable, kRefused };
struct TopicResult {
  TopicErrc code = TopicErrc::kNone;
  std::string detail;
};

class EventPublisher {
 public:
  virtual ~EventPublisher() = default;

  // Produces every message, in order, and waits until each has a delivery report, `cancel` becomes true
  // (checked every 100 ms), or the publisher's delivery deadline passes. Returns one result per message,
  // in the same order; a message without a report is kAbandoned. `still_waiting` is called each time
  // 100 ms pass without every report, so that the caller lets go of what it holds meanwhile.
  virtual std::vector<DeliveryResult> PublishBatch(const std::vector<Message>& messages,
                                                   const std::atomic<bool>& cancel,
                                                   const std::function<void()>& still_waiting) = 0;
  std::vector<DeliveryResult> PublishBatch(const std::vector<Message>& messages, const std::atomic<bool>& cancel) {
    return PublishBatch(messages, cancel, [] {});
  }

  // Creates the topic if it does not exist (an existing one is left as it is).
  virtual TopicResult EnsureTopic(int partitions, int replication_factor, std::chrono::milliseconds timeout) = 0;

  // After messages were not delivered: asks the cluster (metadata, and the topic's min.insync.replicas)
  // why, within about `timeout` per request. Same thread as PublishBatch.
  virtual StallReport DiagnoseStall(std::chrono::milliseconds timeout) = 0;

  // Set once a fatal producer error happened; the publisher is then unusable until Recreate.
  virtual bool fatal() const = 0;
  // `NAME: reason` of the fatal error (rd_kafka_fatal_error's original error), empty while there is none.
  virtual std::string fatal_reason() const = 0;

  // Destroys the producer, after waiting a moment for the reports of what it had in flight (they are
  // dropped: the caller already treats those messages as not delivered), and makes a new one with the same
  // configuration, with no fatal error. The only way on after a fatal error: librdkafka's producer (its
  // idempotence state: producer id, epoch, sequences) cannot be repaired in place. Throws KafkaConfigError
  // if librdkafka refuses to create the new one.
  virtual void Recreate() = 0;
};

struct RdKafkaOptions {
  std::string bootstrap_servers;
  std::string topic;
  // librdkafka properties (security.protocol, sasl.*, ssl.*, compression.type, linger.ms, ...), applied
  // before the ones the relay's guarantees depend on, which always win: enable.idempotence=true,
  // acks=all, partitioner=murmur2_random (Java's key -> partition mapping).
  std::map<std::string, std::string> properties;
  // How long PublishBatch waits for reports at most (0: until each has one). librdkafka reports every
  // message within message.timeout.ms, or socket.timeout.ms after its request went out; this bounds the
  // wait whatever the library does, so a black-holed broker never holds the caller longer.
  std::chrono::milliseconds delivery_deadline{0};
};

// Thrown by MakeRdKafkaPublisher (start-up only) when a property is unknown or invalid.
class KafkaConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Thread safety: PublishBatch and EnsureTopic are called from one thread at a time; fatal() from any.
std::unique_ptr<EventPublisher> MakeRdKafkaPublisher(RdKafkaOptions options);

// The librdkafka version string, for the start-up log.
std::string LibraryVersion();

}  // namespace charge_outbox::kafka
