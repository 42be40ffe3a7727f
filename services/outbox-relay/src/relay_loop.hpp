// RelayLoop: one relay replica's work. Each turn: keep the session open, rebalance shards now and then,
// claim the next events of the owned shards, produce them all, wait for every delivery report, park the
// ones Kafka refuses permanently, mark exactly the delivered ones published.
//
// Runs on one thread (the session is one connection and is not thread-safe). ready() and finished() may
// be read from any thread. Ordering argument: docs/outbox-relay.md.
#pragma once

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "charge_outbox/kafka/event_publisher.hpp"
#include "charge_outbox/outbox/outbox_store.hpp"
#include "relay_probe.hpp"

namespace charge_outbox::outbox_relay {

struct RelayLoopOptions {
  int worker = 0;  // this loop's index in the process (for logs and the owned-shards gauge)
  int batch_size = 1000;
  int waves = 1;  // events of one charge per batch (see outbox::RelaySession::Claim)
  std::chrono::milliseconds poll_interval{1000};
  std::chrono::milliseconds wake_delay{0};  // after a notification, before claiming
  // After the last batch, how long empty claims are repeated (every wake_delay, at least 2 ms) before the
  // loop arms its wake-ups and sleeps: under a steady flow it stays awake and writers never notify.
  std::chrono::milliseconds idle_grace{0};
  std::chrono::milliseconds rebalance_interval{1000};
  std::chrono::milliseconds retry_backoff{200};
  std::chrono::milliseconds max_retry_backoff{5000};
  std::string cloudevents_source;
  bool create_topic = true;
  int topic_partitions = 6;
  int topic_replication_factor = 1;
  std::chrono::milliseconds topic_timeout{10'000};
};

// Exit status when the producer hit a fatal error (the process restarts clean).
inline constexpr int kExitFatalProducer = 1;

// The Kafka message of an event: key = charge id, value = payload, CloudEvents binary-mode headers. It
// refers to `event` and `source`, which must outlive it.
kafka::Message ToMessage(const outbox::OutboxEvent& event, const std::string& source);

class RelayLoop {
 public:
  RelayLoop(outbox::RelaySession& session, kafka::EventPublisher& publisher, RelayProbe& probe,
            RelayLoopOptions options);

  // Returns when `stop` is set (0) or on a fatal producer error or a topic Kafka refuses to create (1).
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
  bool EnsureTopic(const std::atomic<bool>& stop);

  outbox::RelaySession& session_;
  kafka::EventPublisher& publisher_;
  RelayProbe& probe_;
  RelayLoopOptions options_;
  std::atomic<bool> ready_{false};
  std::atomic<std::chrono::steady_clock::rep> progress_{std::chrono::steady_clock::now().time_since_epoch().count()};
};

// Sleeps up to `duration`, waking early when `stop` is set.
void SleepUnless(const std::atomic<bool>& stop, std::chrono::milliseconds duration);

}  // namespace charge_outbox::outbox_relay
