// RelayLoop: one relay replica's work. Each turn: keep the session open, rebalance shards now and then,
// claim the next events of the owned shards, produce them all, wait for every delivery report, park the
// ones Kafka refuses permanently, mark exactly the delivered ones published.
//
// Runs on one thread (the session is one connection and is not thread-safe). ready() and finished() may
// be read from any thread. Ordering argument: docs/outbox-relay.md.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "charge_outbox/kafka/event_publisher.hpp"
#include "charge_outbox/outbox/outbox_store.hpp"
#include "charge_outbox/retry/backoff.hpp"
#include "relay_probe.hpp"

namespace charge_outbox::outbox_relay {

struct RelayLoopOptions {
  int worker = 0;  // this loop's index in the process (for logs and the owned-shards gauge)
  int batch_size = 1000;
  int waves = 1;  // events of one charge per batch (see outbox::RelaySession::Claim)
  std::chrono::milliseconds poll_interval{1000};
  // The latency traded for cost (docs/outbox-relay.md, "Linger"): the longest a committed event waits for
  // others to join its batch. Claims that find events, or follow a notification, start at least this long
  // after the previous one (a full batch excepted: a backlog is drained back to back).
  std::chrono::milliseconds linger{0};
  // Delivered events are marked published together, once the oldest unmarked one is this old or
  // `mark_at_once` are waiting, and always before a rebalance, a sleep and the end: under a steady flow a
  // mark serves several claims (docs/outbox-relay.md, "Marks"). What is unmarked when the process dies is
  // sent again, as an unmarked batch always was.
  std::chrono::milliseconds mark_delay{50};
  int mark_at_once = 500;
  std::chrono::milliseconds rebalance_interval{1000};
  // After a failure (database, topic creation, a batch to send again): 200 ms doubling up to 5 s, unjittered.
  retry::BackoffOptions backoff{std::chrono::milliseconds{200}, std::chrono::milliseconds{5000}};
  // ce_source of a row that records its producer: `<cloudevents_source_base>/<producer>`; of one that does not
  // (written before migration 0009, or by a session without an application_name): cloudevents_source.
  std::string cloudevents_source_base = "/charge-outbox";
  std::string cloudevents_source = "/charge-outbox/charge-api";
  bool cloudevents_structured = false;  // CloudEvents structured mode instead of binary mode (see ToMessage)
  bool create_topic = true;
  int topic_partitions = 6;
  int topic_replication_factor = 1;
  std::chrono::milliseconds topic_timeout{10'000};
};

// Exit status when Kafka refuses to create the topic, or a producer could not be recreated after a fatal
// error (the process restarts clean).
inline constexpr int kExitFatalProducer = 1;

// The JSON Schema of an event type's payload, named in ce_dataschema: kDataSchemaBase + type + ".json", the
// `$id` of schemas/events/<type>.json (docs/events.md). A name, not a location to fetch at run time.
inline constexpr std::string_view kDataSchemaBase = "https://charge-outbox.example/schemas/events/";

// The attributes the relay derives from a row instead of copying it: ce_source from the row's producer,
// ce_dataschema from its type. Each distinct one is built once and kept (a handful: producers and event
// types), so that a batch's messages refer to them without a string built per event. One per relay loop.
class EventAttributes {
 public:
  EventAttributes(std::string source_base, std::string fallback_source);
  // `<source_base>/<producer>`; the fallback source for an empty producer or one that is not a plain name
  // (lowercase letters, digits, '-' and '_': the daemons' application_name), which a URI must not carry raw.
  std::string_view Source(std::string_view producer);
  std::string_view DataSchema(std::string_view type);

 private:
  std::string source_base_;
  std::string fallback_source_;
  std::map<std::string, std::string, std::less<>> sources_;
  std::map<std::string, std::string, std::less<>> schemas_;
};

// The Kafka message of an event in CloudEvents binary mode: key = charge id, value = payload, the attributes
// in ce_* headers. It refers to `event`, `source` and `dataschema`, which must outlive it.
kafka::Message ToMessage(const outbox::OutboxEvent& event, std::string_view source, std::string_view dataschema);

// The same event in CloudEvents structured mode, for sinks that drop Kafka headers: key = charge id, value
// = one JSON object (`application/cloudevents+json`) with the attributes and the payload as `data`, which
// this builds into `value`; headers: content-type and traceparent. It refers to `event` and `value`.
kafka::Message ToStructuredMessage(const outbox::OutboxEvent& event, std::string_view source,
                                   std::string_view dataschema, std::string& value);

class RelayLoop {
 public:
  RelayLoop(outbox::RelaySession& session, kafka::EventPublisher& publisher, RelayProbe& probe,
            RelayLoopOptions options);

  // Returns when `stop` is set (0), or when Kafka refuses to create the topic or a producer cannot be
  // recreated (1). A fatal producer error recreates the producer and goes on (RecreateProducer).
  // A batch in flight when `stop` is set is abandoned: whatever has no success report stays unpublished.
  int Run(const std::atomic<bool>& stop);

  bool ready() const { return ready_.load(); }

  // When the loop last finished a step: each turn (an idle one too), each wave of a batch, each try at
  // creating the topic. Every step is bounded (database.call_timeout, the Kafka delivery deadline, the
  // backoff), so a loop whose last step is older than the longest of those is wedged: /healthz says so.
  std::chrono::steady_clock::time_point last_progress() const {
    return std::chrono::steady_clock::time_point(std::chrono::steady_clock::duration(progress_.load()));
  }

 private:
  void Beat() { progress_ = std::chrono::steady_clock::now().time_since_epoch().count(); }
  enum class BatchOutcome { kDone, kRetryLater, kFatal };
  BatchOutcome PublishBatch(const std::vector<outbox::OutboxEvent>& batch, const std::atomic<bool>& stop);
  // Marks the delivered events not marked yet; false (and they are forgotten: sent again) if that failed.
  bool MarkDelivered();
  // After a fatal producer error: marks what was delivered, logs the error, recreates the producer;
  // the events without a persisted report stay unpublished and are claimed again. False if it failed.
  bool RecreateProducer();
  bool MarkDue() const;
  // Before the loop waits on anything but the database for longer than a mark's delay (a backoff, a long
  // linger, Kafka's slow reports): its claims' transaction holds locks a DDL statement would wait behind.
  void EndClaims();
  bool EnsureTopic(const std::atomic<bool>& stop);

  outbox::RelaySession& session_;
  kafka::EventPublisher& publisher_;
  RelayProbe& probe_;
  RelayLoopOptions options_;
  EventAttributes attributes_;
  // Delivered by this loop's session, not marked yet; a claim leaves them out (their positions).
  std::vector<outbox::DeliveredRow> unmarked_;
  std::vector<std::int64_t> unmarked_positions_;
  std::chrono::steady_clock::time_point oldest_unmarked_;
  std::int64_t undelivered_at_fatal_ = 0;  // events of the batch a fatal error cut short, for the log
  std::atomic<bool> ready_{false};
  std::atomic<std::chrono::steady_clock::rep> progress_{std::chrono::steady_clock::now().time_since_epoch().count()};
};

// Sleeps up to `duration`, waking early when `stop` is set.
void SleepUnless(const std::atomic<bool>& stop, std::chrono::milliseconds duration);

}  // namespace charge_outbox::outbox_relay
