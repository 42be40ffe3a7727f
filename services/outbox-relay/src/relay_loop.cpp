#include "relay_loop.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <string_view>
#include <thread>
#include <unordered_set>
#include <utility>

#include "charge_outbox/failpoints/failpoints.hpp"
#include "charge_outbox/log/log.hpp"
#include "charge_outbox/retry/retryability.hpp"

namespace charge_outbox::outbox_relay {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// How soon to try again to arm a shard whose writer was still committing.
constexpr milliseconds kArmRetry{2};
// Between events the loop stays awake for this many empty claims, each relay.linger apart (at least
// kShortestPoll), before it arms its wake-ups and sleeps: an awake relay costs one empty claim per poll,
// a sleeping one makes the next writer NOTIFY (which serialises its commit) and takes several round trips
// to wake. Under a flow of more than one event per ten polls it never sleeps, so writers never notify.
constexpr int kAwakePolls = 10;
constexpr milliseconds kShortestPoll{2};
// How long asking the cluster why a batch was not delivered may take, per request (metadata, configs).
constexpr milliseconds kDiagnoseTimeout{2000};

}  // namespace

void SleepUnless(const std::atomic<bool>& stop, milliseconds duration) {
  const auto until = Clock::now() + duration;
  // Until a time point, not for a count of milliseconds: a remainder truncated to 0 ms would spin.
  while (!stop.load() && Clock::now() < until) {
    std::this_thread::sleep_until(std::min(until, Clock::now() + milliseconds{50}));
  }
}

namespace {

bool IsPlainName(std::string_view name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  });
}

template <typename Make>
const std::string& Intern(std::map<std::string, std::string, std::less<>>& cache, std::string_view key, Make make) {
  if (const auto it = cache.find(key); it != cache.end()) return it->second;
  return cache.emplace(std::string(key), make()).first->second;
}

// A JSON string literal of `text`: the attributes come from rows and configuration, so quote them properly.
void AppendJsonString(std::string& out, std::string_view text) {
  out += '"';
  for (const char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          constexpr char kHex[] = "0123456789abcdef";
          out += "\\u00";
          out += kHex[(c >> 4) & 0xF];
          out += kHex[c & 0xF];
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

}  // namespace

EventAttributes::EventAttributes(std::string source_base, std::string fallback_source)
    : source_base_(std::move(source_base)), fallback_source_(std::move(fallback_source)) {}

std::string_view EventAttributes::Source(std::string_view producer) {
  if (!IsPlainName(producer)) return fallback_source_;
  return Intern(sources_, producer, [&] { return source_base_ + "/" + std::string(producer); });
}

std::string_view EventAttributes::DataSchema(std::string_view type) {
  return Intern(schemas_, type, [&] { return std::string(kDataSchemaBase) + std::string(type) + ".json"; });
}

kafka::Message ToMessage(const outbox::OutboxEvent& event, std::string_view source, std::string_view dataschema) {
  kafka::Message m{.key = event.aggregateid, .value = event.payload, .headers = {}};
  m.headers.reserve(9);
  m.headers.emplace_back("ce_specversion", "1.0");
  m.headers.emplace_back("ce_id", event.id);
  m.headers.emplace_back("ce_source", source);
  m.headers.emplace_back("ce_type", event.type);
  m.headers.emplace_back("ce_time", event.time);
  m.headers.emplace_back("ce_subject", event.aggregateid);
  m.headers.emplace_back("ce_dataschema", dataschema);
  m.headers.emplace_back("content-type", "application/json");
  if (!event.traceparent.empty()) m.headers.emplace_back("traceparent", event.traceparent);
  return m;
}

kafka::Message ToStructuredMessage(const outbox::OutboxEvent& event, std::string_view source,
                                   std::string_view dataschema, std::string& value) {
  value.clear();
  value.reserve(event.payload.size() + 400);
  const std::pair<std::string_view, std::string_view> attributes[] = {
      {"specversion", "1.0"},
      {"id", event.id},
      {"source", source},
      {"type", event.type},
      {"subject", event.aggregateid},
      {"time", event.time},
      {"datacontenttype", "application/json"},
      {"dataschema", dataschema},
  };
  value += '{';
  for (const auto& [name, text] : attributes) {
    AppendJsonString(value, name);
    value += ':';
    AppendJsonString(value, text);
    value += ',';
  }
  // The distributed tracing extension: the attribute travels in the value, where a sink keeps it.
  if (!event.traceparent.empty()) {
    value += "\"traceparent\":";
    AppendJsonString(value, event.traceparent);
    value += ',';
  }
  // The payload is JSON already (PostgreSQL's json, as the charge store wrote it): embedded as it is.
  value += "\"data\":";
  value += event.payload;
  value += '}';
  kafka::Message m{.key = event.aggregateid, .value = value, .headers = {}};
  m.headers.reserve(2);
  m.headers.emplace_back("content-type", "application/cloudevents+json");
  if (!event.traceparent.empty()) m.headers.emplace_back("traceparent", event.traceparent);
  return m;
}

RelayLoop::RelayLoop(outbox::RelaySession& session, kafka::EventPublisher& publisher, RelayProbe& probe,
                     RelayLoopOptions options)
    : session_(session),
      publisher_(publisher),
      probe_(probe),
      options_(std::move(options)),
      attributes_(options_.cloudevents_source_base, options_.cloudevents_source) {}

bool RelayLoop::EnsureTopic(const std::atomic<bool>& stop) {
  if (!options_.create_topic) return true;
  const retry::Backoff backoff(options_.backoff);
  for (int failures = 0; !stop.load(); ++failures) {
    Beat();
    const auto result =
        publisher_.EnsureTopic(options_.topic_partitions, options_.topic_replication_factor, options_.topic_timeout);
    switch (result.code) {
      case kafka::TopicErrc::kNone:
        return true;
      case kafka::TopicErrc::kRefused:
        spdlog::error("kafka refused to create the topic: {} (fix kafka.topic_partitions / "
                      "kafka.topic_replication_factor, or create it yourself and set kafka.create_topic=false)",
                      result.detail);
        return false;
      case kafka::TopicErrc::kUnavailable:
        spdlog::warn("creating the topic failed, trying again in {}ms: {}", backoff.Ceiling(failures).count(),
                     result.detail);
        break;
    }
    SleepUnless(stop, backoff.Ceiling(failures));
  }
  return true;
}

int RelayLoop::Run(const std::atomic<bool>& stop) {
  if (!EnsureTopic(stop)) return kExitFatalProducer;
  std::vector<int> owned;
  auto next_rebalance = Clock::now();
  const auto empty_poll = std::max(options_.linger, kShortestPoll);
  const auto awake_after_work = kAwakePolls * empty_poll;
  auto last_work = Clock::time_point{};   // when a claim last found events
  auto next_claim = Clock::time_point{};  // no claim starts before this (relay.linger)
  // Alone in its process, the loop waits the backoff's ceiling itself (retry/backoff.hpp says why).
  const retry::Backoff backoff(options_.backoff);
  int failures = 0;  // since the last success
  auto wait_after_failure = [&] {
    EndClaims();
    SleepUnless(stop, backoff.Ceiling(failures++));
  };
  auto failed = [&](const char* what, const outbox::DbError& error) {
    probe_.OnDatabaseError();
    spdlog::warn("{} failed ({}: {}), trying again in {}ms", what, db::ToString(error.code), error.detail,
                 backoff.Ceiling(failures).count());
    wait_after_failure();
  };

  while (!stop.load()) {
    Beat();
    // A fatal error seen outside a batch (librdkafka reports it from any poll).
    if (publisher_.fatal() && !RecreateProducer()) return kExitFatalProducer;
    if (!session_.IsOpen()) {
      // A new session holds no locks: start from nothing and rebalance at once.
      ready_ = false;
      if (!owned.empty()) spdlog::warn("database session lost: released all {} shards", owned.size());
      owned.clear();
      unmarked_.clear();  // sent again by whoever owns their shards next
      unmarked_positions_.clear();
      probe_.SetOwnership(options_.worker, 0, 0);
      if (auto opened = session_.Open(); !opened) {
        failed("opening the relay session", opened.error());
        continue;
      }
      next_rebalance = Clock::now();
      failures = 0;
    }
    if (Clock::now() >= next_rebalance) {
      // Before letting shards go: their next owner must not send again what this one delivered.
      if (!MarkDelivered()) {
        wait_after_failure();
        continue;
      }
      auto assignment = session_.Rebalance();
      if (!assignment) {
        failed("rebalancing shards", assignment.error());
        continue;
      }
      if (assignment->owned != owned) {
        spdlog::info("worker {} owning {} of {} shards (member {} of {})", options_.worker, assignment->owned.size(),
                     outbox::kShardCount, assignment->rank + 1, assignment->members);
      }
      owned = std::move(assignment->owned);
      probe_.SetOwnership(options_.worker, owned.size(), assignment->members);
      next_rebalance = Clock::now() + options_.rebalance_interval;
      ready_ = true;
    }

    // Lingering lets the events committed meanwhile join one claim, one mark and one produce: under a
    // steady flow the database's work follows the events instead of the polls.
    if (const auto now = Clock::now(); now < next_claim) {
      if (next_claim - now > options_.mark_delay) EndClaims();
      SleepUnless(stop, std::chrono::ceil<milliseconds>(next_claim - now));
      if (stop.load()) break;
    }
    const auto claimed_at = Clock::now();
    auto batch = session_.Claim(owned, options_.batch_size, options_.waves, unmarked_positions_);
    if (!batch) {
      failed("claiming events", batch.error());
      continue;
    }
    if (batch->empty()) {
      if (claimed_at - last_work < awake_after_work) {
        // Events came a moment ago and more are likely: look again shortly instead of arming, since an
        // armed relay makes the next writer NOTIFY, and every NOTIFY serialises a commit.
        next_claim = claimed_at + empty_poll;
        if (MarkDue() && !MarkDelivered()) wait_after_failure();
        continue;
      }
      // Nothing is left unmarked while the loop sleeps.
      if (!MarkDelivered()) {
        wait_after_failure();
        continue;
      }
      // Idle. Arm the wake-up first (writers of our shards then NOTIFY; migration 0004), and when that
      // armed anything, claim once more before sleeping: the writers that skipped notifying while we were
      // busy have committed by now. The timeout is the polling fallback; it never sleeps past the next
      // rebalance, and it is short while a writer still holds a shard we could not arm.
      auto armed = session_.ArmWakeups(owned);
      if (!armed) {
        failed("arming wake-ups", armed.error());
        continue;
      }
      if (armed->newly_armed > 0) continue;
      const auto until_rebalance =
          std::chrono::duration_cast<milliseconds>(next_rebalance - Clock::now()) + milliseconds{1};
      auto wait = std::clamp(until_rebalance, milliseconds{1}, options_.poll_interval);
      if (armed->pending > 0) wait = std::min(wait, kArmRetry);
      auto waited = session_.WaitForInsert(wait);
      if (!waited) {
        failed("waiting for notifications", waited.error());
      } else if (*waited) {
        // Woken by a writer: silence the other writers first (each NOTIFY serialises a commit), then let
        // the events behind it gather for relay.linger.
        if (auto disarmed = session_.DisarmWakeups(); !disarmed) {
          failed("disarming wake-ups", disarmed.error());
          continue;
        }
        next_claim = Clock::now() + options_.linger;
      }
      continue;
    }
    last_work = claimed_at;
    // A full batch means a backlog: the next claim follows at once.
    next_claim = std::ssize(*batch) >= options_.batch_size ? claimed_at : claimed_at + options_.linger;
    // Busy: writers need not notify until we sleep again.
    if (auto disarmed = session_.DisarmWakeups(); !disarmed) {
      failed("disarming wake-ups", disarmed.error());
      continue;
    }
    switch (PublishBatch(*batch, stop)) {
      case BatchOutcome::kDone:
        failures = 0;
        break;
      case BatchOutcome::kRetryLater:
        wait_after_failure();
        break;
      case BatchOutcome::kFatal:
        if (!RecreateProducer()) return kExitFatalProducer;
        failures = 0;
        break;
    }
  }
  if (session_.IsOpen()) MarkDelivered();
  return 0;
}

bool RelayLoop::RecreateProducer() {
  // What was reported persisted is marked (a new producer changes nothing about it); every other event
  // of the batch is unpublished and not in unmarked_, so the next claim takes it again: wave 0 is each
  // charge's first unpublished event, which keeps per-charge order across the new producer.
  MarkDelivered();
  const auto reason = publisher_.fatal_reason();
  const auto undelivered = std::exchange(undelivered_at_fatal_, 0);
  const auto started = Clock::now();
  try {
    publisher_.Recreate();
  } catch (const kafka::KafkaConfigError& e) {
    spdlog::error("kafka producer fatal error: {}; recreating the producer failed ({}), exiting so that a fresh "
                  "process takes over",
                  reason, e.what());
    return false;
  }
  probe_.OnProducerRecreated();
  spdlog::error("kafka producer fatal error: {}; producer recreated in {}ms, {} events of the batch without a "
                "persisted report are sent again",
                reason, std::chrono::duration_cast<milliseconds>(Clock::now() - started).count(), undelivered);
  return true;
}

bool RelayLoop::MarkDue() const {
  return !unmarked_.empty() && (std::ssize(unmarked_) >= options_.mark_at_once ||
                                Clock::now() - oldest_unmarked_ >= options_.mark_delay);
}

void RelayLoop::EndClaims() {
  if (auto ended = session_.EndClaims(); !ended) probe_.OnDatabaseError();
}

bool RelayLoop::MarkDelivered() {
  if (unmarked_.empty()) return true;
  const auto marked = session_.MarkPublished(unmarked_);
  const auto count = unmarked_.size();
  unmarked_.clear();
  unmarked_positions_.clear();
  if (!marked) {
    probe_.OnDatabaseError();
    spdlog::warn("marking {} delivered events failed ({}); they will be sent again", count, marked.error().detail);
    return false;
  }
  probe_.OnPublished(*marked);
  return true;
}

RelayLoop::BatchOutcome RelayLoop::PublishBatch(const std::vector<outbox::OutboxEvent>& batch,
                                                const std::atomic<bool>& stop) {
  const auto started = Clock::now();
  spdlog::debug("publishing a batch of {} events", batch.size());
  // Wave by wave: a charge's event of wave k+1 is produced only once its event of wave k has a persisted
  // report, so it reaches Kafka after it whatever librdkafka retries. A charge whose event was not
  // delivered sends nothing more in this batch; those later events stay unpublished, held, not failed.
  std::vector<kafka::DeliveryResult> results(batch.size());
  std::vector<bool> sent(batch.size(), false);
  std::vector<std::string> structured_values(options_.cloudevents_structured ? batch.size() : 0);
  std::unordered_set<std::string_view> stopped_charges;
  int waves = 0;
  for (const auto& event : batch) waves = std::max(waves, event.wave + 1);
  for (int wave = 0; wave < waves && (wave == 0 || (!stop.load() && !publisher_.fatal())); ++wave) {
    std::vector<std::size_t> members;
    std::vector<kafka::Message> messages;
    for (std::size_t i = 0; i < batch.size(); ++i) {
      if (batch[i].wave != wave || stopped_charges.contains(batch[i].aggregateid)) continue;
      members.push_back(i);
      const auto source = attributes_.Source(batch[i].producer);
      const auto dataschema = attributes_.DataSchema(batch[i].type);
      messages.push_back(options_.cloudevents_structured
                             ? ToStructuredMessage(batch[i], source, dataschema, structured_values[i])
                             : ToMessage(batch[i], source, dataschema));
    }
    if (messages.empty()) break;  // every charge with a later wave stopped
    Beat();
    const auto reports = publisher_.PublishBatch(messages, stop, [this] { EndClaims(); });
    for (std::size_t j = 0; j < members.size(); ++j) {
      results[members[j]] = reports[j];
      sent[members[j]] = true;
      if (reports[j].status != kafka::DeliveryStatus::kDelivered) stopped_charges.insert(batch[members[j]].aggregateid);
    }
  }

  if (failpoints::Hit("relay.after_publish_before_mark")) {
    spdlog::warn("failpoint relay.after_publish_before_mark: leaving {} events unmarked", batch.size());
    return BatchOutcome::kRetryLater;
  }

  if (unmarked_.empty()) oldest_unmarked_ = Clock::now();
  std::int64_t retriable = 0;
  std::int64_t parked = 0;
  std::int64_t held = 0;
  // The producer, not the messages: it is recreated, and what it did not deliver is sent again. The
  // messages themselves may carry kFatal or the purge's _PURGE_QUEUE, both transient.
  const bool fatal = publisher_.fatal();
  std::string first_error;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    if (!sent[i]) {  // held behind its charge's undelivered event, or not sent because we are stopping
      ++held;
      continue;
    }
    const auto& result = results[i];
    switch (kafka::RetryabilityOf(result.status)) {
      case retry::Retryability::kDefinitive:
        unmarked_.push_back({.position = batch[i].position, .created_at_us = batch[i].created_at_us});
        unmarked_positions_.push_back(batch[i].position);
        break;
      case retry::Retryability::kNever:
        // Parked, it stays unpublished: its charge's later events keep waiting behind it (a claim holds
        // a charge back from its parked event on), other charges flow.
        if (auto p = session_.Park(batch[i], result.error); p) {
          ++parked;
          // Under the trace of the request or run that caused the event, as its Kafka headers would be.
          log::WithTrace(log::TraceIdOf(batch[i].traceparent), spdlog::level::err,
                         "parked event {} of {} (sequence {}): {}; see `outbox-relay parked list`", batch[i].id,
                         batch[i].aggregateid, batch[i].sequence, result.error);
        } else {
          ++retriable;
          probe_.OnDatabaseError();
        }
        break;
      case retry::Retryability::kTransient:
        if (first_error.empty()) first_error = result.error;
        ++retriable;
        break;
    }
  }
  // What was delivered is marked even when the rest failed (it would only be sent again otherwise), now
  // or with a later batch's.
  const bool marked = !MarkDue() || MarkDelivered();
  if (parked > 0) probe_.OnParked(parked);
  if (retriable > 0 || (held > 0 && (stop.load() || fatal))) {
    probe_.OnRetriableErrors(retriable);
    if (fatal) {
      undelivered_at_fatal_ = retriable + held;  // RecreateProducer logs it
    } else if (stop.load()) {
      spdlog::info("stopping: abandoned {} of {} events without a success report; they stay unpublished",
                   retriable + held, batch.size());
    } else {
      // The report alone rarely names the cause (below min.insync.replicas, librdkafka retries until
      // message.timeout.ms and reports a timeout): ask the cluster, so the log and the gauge say why.
      EndClaims();
      const auto stall = publisher_.DiagnoseStall(kDiagnoseTimeout);
      probe_.SetKafkaStall(stall.cause);
      spdlog::warn("{} of {} events not delivered, sending again: {}; kafka: {}: {}", retriable, batch.size(),
                   first_error, kafka::StallCauseName(stall.cause), stall.detail);
    }
  } else if (!fatal && !stop.load()) {
    probe_.SetKafkaStall(kafka::StallCause::kNone);
  }
  probe_.OnBatch(Clock::now() - started, batch.size());
  if (fatal) return BatchOutcome::kFatal;
  return (retriable > 0 || !marked) ? BatchOutcome::kRetryLater : BatchOutcome::kDone;
}

}  // namespace charge_outbox::outbox_relay
