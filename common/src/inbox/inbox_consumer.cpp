#include <librdkafka/rdkafka.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "charge_outbox/config/config.hpp"
#include "charge_outbox/failpoints/failpoints.hpp"
#include "charge_outbox/inbox/inbox.hpp"
#include "charge_outbox/kafka/client_properties.hpp"
#include "charge_outbox/util/time.hpp"
#include "inbox/pg/pg_inbox.hpp"

namespace charge_outbox::inbox {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

// How long a revocation may spend applying what was read before letting go of the partitions.
constexpr std::chrono::seconds kRevokeBudget{5};

// The last offset applied per partition, to commit as offset + 1.
using Offsets = std::map<int, std::int64_t>;

// A rejected message's key or value as text a person can read and PostgreSQL can store (no NUL, valid
// UTF-8): printable ASCII as it is, every other byte as \xNN.
std::string Printable(std::string_view bytes, std::size_t limit) {
  std::string out;
  out.reserve(std::min(bytes.size(), limit));
  for (const char c : bytes.substr(0, limit)) {
    const auto b = static_cast<unsigned char>(c);
    if ((b >= 0x20 && b < 0x7f) || b == '\n' || b == '\t') {
      out += c;
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[b >> 4];
      out += kHex[b & 0xf];
    }
  }
  return out;
}

// The record's timestamp, or none for librdkafka's -1 (a record without one). A producer's absurd one
// saturates to the clock's range instead of overflowing it.
std::optional<std::chrono::system_clock::time_point> RecordTime(const rd_kafka_message_t& m) {
  const std::int64_t millis = rd_kafka_message_timestamp(&m, nullptr);
  if (millis < 0) return std::nullopt;
  constexpr std::int64_t kMaxMillis = std::numeric_limits<std::int64_t>::max() / 1000;
  return util::FromUnixMicros(std::min(millis, kMaxMillis) * 1000);
}

}  // namespace

InboxOptions LoadInboxOptions(config::ConfigReader& r, std::string application_name) {
  InboxOptions o;
  o.application_name = std::move(application_name);
  o.database_url = r.Secret("database.url");
  o.database = db::LoadConnectionSettings(r);
  o.bootstrap_servers = r.String("kafka.bootstrap_servers");
  if (o.bootstrap_servers.empty()) {
    throw config::ConfigError("kafka.bootstrap_servers", "must not be empty (set KAFKA_BOOTSTRAP_SERVERS)");
  }
  o.topic = r.String("kafka.topic", "charge-events");
  if (o.topic.empty()) throw config::ConfigError("kafka.topic", "must not be empty");
  o.group_id = r.String("kafka.group_id", o.application_name);
  if (o.group_id.empty()) throw config::ConfigError("kafka.group_id", "must not be empty");
  kafka::ReadClientProperties(r, o.application_name, o.kafka_properties);
  const auto session_timeout = r.Duration("kafka.session_timeout", seconds{10}, seconds{1}, std::chrono::minutes{30});
  o.kafka_properties["session.timeout.ms"] = std::to_string(session_timeout.count());

  o.consumers = static_cast<int>(r.Integer("inbox.consumers", 2, 1, 64));
  o.major_suffix = r.Choice("inbox.major_version", "v1", {"v1"}) == "v1" ? ".v1" : "";
  o.gaps.policy = r.Choice("inbox.gaps.policy", "apply", {"apply", "hold"}) == "hold" ? GapPolicy::kHold : GapPolicy::kApply;
  o.gaps.wait = r.Duration("inbox.gaps.wait", seconds{30}, milliseconds{0}, std::chrono::hours{24 * 7});
  o.max_batch = static_cast<int>(r.Integer("inbox.batch_size", 5000, 1, 100'000));
  o.poll_timeout = r.Duration("inbox.poll_timeout", milliseconds{100}, milliseconds{1}, seconds{10});
  r.Renamed("inbox.retry_backoff", "inbox.backoff.base");
  r.Renamed("inbox.max_retry_backoff", "inbox.backoff.max");
  o.backoff = retry::LoadBackoffOptions(r, "inbox", o.backoff, milliseconds{1}, std::chrono::minutes{10});
  o.sweep_interval = r.Duration("inbox.sweep_interval", seconds{1}, milliseconds{10}, std::chrono::minutes{10});
  o.retention_days = static_cast<int>(r.Integer("inbox.retention_days", 14, 1, 3650));
  o.progress_retention_days = static_cast<int>(r.Integer("inbox.progress_retention_days", 180, 1, 36500));
  if (o.progress_retention_days < o.retention_days) {
    throw config::ConfigError("inbox.progress_retention_days",
                              "must be at least inbox.retention_days: a charge's progress outlives its events");
  }
  o.partitions_ahead = static_cast<int>(r.Integer("inbox.partitions_ahead", 7, 1, 365));
  o.retention_interval = r.Duration("inbox.retention_interval", std::chrono::minutes{10}, seconds{1}, std::chrono::hours{24});
  return o;
}

InboxProbe::InboxProbe(metrics::Registry& registry)
    : events_(metrics::CounterFamily(registry, "inbox_events_total",
                                     "Messages read from the topic, by what the inbox did with them")),
      applied_(events_.Add({{"outcome", "applied"}})),
      duplicates_(events_.Add({{"outcome", "duplicate"}})),
      held_(events_.Add({{"outcome", "held"}})),
      released_(events_.Add({{"outcome", "released"}})),
      rejected_(events_.Add({{"outcome", "rejected"}})),
      other_version_(events_.Add({{"outcome", "other_version"}})),
      expired_(events_.Add({{"outcome", "expired"}})),
      gaps_(metrics::Counter(registry, "inbox_gaps_total",
                             "Events applied past a gap in their charge's sequence (recorded in inbox_gaps)")),
      batch_failures_(metrics::Counter(registry, "inbox_batch_failures_total",
                                       "Batch transactions that failed and were tried again")),
      commit_failures_(metrics::Counter(registry, "inbox_offset_commit_failures_total",
                                        "Kafka offset commits that failed: harmless alone "
                                        "(the next one covers them; re-deliveries are recognised)")),
      batch_seconds_(metrics::Histogram(registry, "inbox_batch_duration_seconds",
                                        "Time to apply one batch: the transaction, the handler's work included",
                                        metrics::LatencyBuckets())),
      lag_(metrics::Gauge(registry, "inbox_consumer_lag_messages",
                          "Messages on this instance's partitions not yet applied (high watermark minus position)")),
      held_now_(metrics::Gauge(registry, "inbox_held_events",
                               "Events held past a gap now, waiting for the ones before them")),
      expired_kept_(metrics::Gauge(registry, "inbox_expired_events",
                                   "Rows in inbox_expired: events not applied because they were too old, "
                                   "for a person to look at")),
      assigned_(metrics::Gauge(registry, "inbox_assigned_partitions",
                               "Partitions of the topic assigned to this instance")) {}

void InboxProbe::Outcomes(std::int64_t applied, std::int64_t duplicates, std::int64_t held, std::int64_t released,
                          std::int64_t rejected, std::int64_t other_version, std::int64_t expired) {
  applied_.Increment(static_cast<double>(applied));
  duplicates_.Increment(static_cast<double>(duplicates));
  held_.Increment(static_cast<double>(held));
  released_.Increment(static_cast<double>(released));
  rejected_.Increment(static_cast<double>(rejected));
  other_version_.Increment(static_cast<double>(other_version));
  expired_.Increment(static_cast<double>(expired));
}
void InboxProbe::Gaps(std::int64_t count) { gaps_.Increment(static_cast<double>(count)); }
void InboxProbe::BatchApplied(std::chrono::duration<double> took) { batch_seconds_.Observe(took.count()); }
void InboxProbe::BatchFailed() { batch_failures_.Increment(); }
void InboxProbe::CommitFailed() { commit_failures_.Increment(); }
void InboxProbe::LagChanged(std::int64_t delta) { lag_.Increment(static_cast<double>(delta)); }
void InboxProbe::Held(std::int64_t events) { held_now_.Set(static_cast<double>(events)); }
void InboxProbe::ExpiredKept(std::int64_t events) { expired_kept_.Set(static_cast<double>(events)); }
void InboxProbe::AssignedChanged(std::int64_t delta) { assigned_.Increment(static_cast<double>(delta)); }

struct InboxConsumer::Impl {
  Impl(InboxOptions o, EventHandler& h, InboxProbe& p)
      : options(std::move(o)),
        handler(h),
        probe(p),
        store(options.database_url, options.application_name, options.database) {
    char err[512];
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    const auto set = [&](const std::string& key, const std::string& value) {
      if (rd_kafka_conf_set(conf, key.c_str(), value.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK) {
        rd_kafka_conf_destroy(conf);
        throw InboxConfigError("kafka property " + key + ": " + err);
      }
    };
    for (const auto& [key, value] : options.kafka_properties) set(key, value);
    set("bootstrap.servers", options.bootstrap_servers);
    set("group.id", options.group_id);
    // The inbox says when a message is done: only after its transaction committed.
    set("enable.auto.commit", "false");
    set("enable.auto.offset.store", "false");
    set("auto.offset.reset", "earliest");
    rd_kafka_conf_set_opaque(conf, this);
    rd_kafka_conf_set_rebalance_cb(conf, &Impl::OnRebalance);
    rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (rk == nullptr) {
      rd_kafka_conf_destroy(conf);
      throw InboxConfigError(std::string("kafka consumer: ") + err);
    }
    rd_kafka_poll_set_consumer(rk);
    status.last_turn = Clock::now();
  }

  ~Impl() {
    if (rk != nullptr) {
      rd_kafka_consumer_close(rk);
      rd_kafka_destroy(rk);
    }
  }

  // librdkafka calls this from inside rd_kafka_consumer_poll, on the loop's thread.
  static void OnRebalance(rd_kafka_t* rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t* partitions,
                          void* opaque) {
    auto& self = *static_cast<Impl*>(opaque);
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
      spdlog::info("inbox: assigned {} partition(s) of {}", partitions->cnt, self.options.topic);
      rd_kafka_assign(rk, partitions);
      self.probe.AssignedChanged(partitions->cnt - self.assigned);
      self.assigned = partitions->cnt;
    } else {
      // Apply what was read from these partitions and commit it before they go to another instance,
      // so the new owner starts where this one stopped (a failure here only means re-deliveries).
      spdlog::info("inbox: {} partition(s) revoked", partitions->cnt);
      // Bounded: the whole group waits for this member to let go. What cannot be applied in time is
      // the next owner's to read again.
      self.Flush(/*synchronous=*/true, Clock::now() + kRevokeBudget);
      // Whatever could not be applied (the loop is stopping) is the next owner's to read: committing it
      // later could move that owner's offsets back.
      self.pending.clear();
      self.applied.clear();
      rd_kafka_assign(rk, nullptr);
      self.probe.AssignedChanged(-self.assigned);
      self.assigned = 0;
      self.probe.LagChanged(-self.lag);  // no partitions, no lag of this consumer's
      self.lag = 0;
    }
    std::lock_guard lock(self.status_mutex);
    self.status.assigned_partitions = self.assigned;
  }

  int Run(const std::atomic<bool>& stop) {
    rd_kafka_topic_partition_list_t* topics = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(topics, options.topic.c_str(), RD_KAFKA_PARTITION_UA);
    const auto err = rd_kafka_subscribe(rk, topics);
    rd_kafka_topic_partition_list_destroy(topics);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      spdlog::error("inbox: cannot subscribe to {}: {}", options.topic, rd_kafka_err2str(err));
      return 1;
    }
    stop_ = &stop;
    auto next_sweep = Clock::now();
    auto next_retention = Clock::now();
    while (!stop.load()) {
      Turn();
      if (fatal) break;
      Collect();
      Flush(/*synchronous=*/false);
      const auto now = Clock::now();
      if (now >= next_sweep) {
        Sweep();
        next_sweep = now + options.sweep_interval;
      }
      if (now >= next_retention) {
        Retention();
        next_retention = now + options.retention_interval;
      }
    }
    // Leave the group: the revocation applies and commits what was read.
    Flush(/*synchronous=*/true);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    rk = nullptr;
    return fatal ? 1 : 0;
  }

  void Turn() {
    std::lock_guard lock(status_mutex);
    status.last_turn = Clock::now();
  }

  // Reads up to max_batch messages: waits poll_timeout for the first, then takes what is already here.
  void Collect() {
    auto timeout = static_cast<int>(options.poll_timeout.count());
    while (static_cast<int>(pending.size()) < options.max_batch) {
      rd_kafka_message_t* m = rd_kafka_consumer_poll(rk, timeout);
      if (m == nullptr) return;
      timeout = 0;
      if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
          spdlog::warn("inbox: consumer error: {}", rd_kafka_message_errstr(m));
          char reason[512];
          if (rd_kafka_fatal_error(rk, reason, sizeof reason) != RD_KAFKA_RESP_ERR_NO_ERROR) {
            spdlog::error("inbox: fatal consumer error: {}", reason);
            fatal = true;
          }
        }
        rd_kafka_message_destroy(m);
        continue;
      }
      pending.emplace_back(m);
    }
  }

  struct MessageDeleter {
    void operator()(rd_kafka_message_t* m) const { rd_kafka_message_destroy(m); }
  };
  using Message = std::unique_ptr<rd_kafka_message_t, MessageDeleter>;

  static MessageView View(const rd_kafka_message_t& m) {
    MessageView view{.key = {static_cast<const char*>(m.key), m.key_len},
                     .value = {static_cast<const char*>(m.payload), m.len},
                     .headers = {},
                     .record_time = RecordTime(m)};
    rd_kafka_headers_t* headers = nullptr;
    if (rd_kafka_message_headers(&m, &headers) == RD_KAFKA_RESP_ERR_NO_ERROR) {
      const char* name = nullptr;
      const void* value = nullptr;
      std::size_t size = 0;
      for (std::size_t i = 0; rd_kafka_header_get_all(headers, i, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR; ++i) {
        view.headers.emplace_back(name, value == nullptr ? std::string_view{}
                                                         : std::string_view(static_cast<const char*>(value), size));
      }
    }
    return view;
  }

  // Applies the pending messages in one transaction, retrying until it commits (or the loop stops), then
  // commits their offsets.
  void Flush(bool synchronous, std::optional<Clock::time_point> give_up = std::nullopt) {
    if (!pending.empty()) {
      std::vector<ChargeEvent> events;
      std::vector<RejectedMessage> rejected;
      std::int64_t other_version = 0;
      Offsets offsets;
      events.reserve(pending.size());
      for (const auto& m : pending) {
        auto parsed = ParseChargeEvent(View(*m), options.major_suffix);
        switch (parsed.kind) {
          case ParsedMessage::Kind::kEvent:
            events.push_back(std::move(*parsed.event));
            events.back().partition = m->partition;
            events.back().offset = m->offset;
            break;
          case ParsedMessage::Kind::kOtherVersion:
            ++other_version;
            break;
          case ParsedMessage::Kind::kRejected: {
            rejected.push_back({.topic = options.topic,
                                .partition = m->partition,
                                .offset = m->offset,
                                .reason = parsed.rejection,
                                .key = Printable({static_cast<const char*>(m->key), m->key_len}, 256),
                                .value = Printable({static_cast<const char*>(m->payload), m->len}, kRejectedValueLimit)});
            spdlog::warn("inbox: rejected partition {} offset {}: {}", m->partition, m->offset, parsed.rejection);
            break;
          }
        }
        auto& last = offsets[m->partition];
        last = std::max(last, m->offset);
      }
      if (!ApplyWithRetry(events, rejected, other_version, give_up)) return;  // nothing committed
      // Applied and committed in the database, offsets not yet committed to Kafka: a crash here means
      // the whole batch comes again, and every event of it is recognised as a duplicate.
      failpoints::Hit("inbox.after_commit_before_offset_commit");
      pending.clear();
      for (const auto& [partition, offset] : offsets) {
        auto& last = applied[partition];
        last = std::max(last, offset + 1);
      }
    }
    CommitOffsets(synchronous);
  }

  // False when the loop is stopping or `give_up` passed: then nothing was applied.
  bool ApplyWithRetry(const std::vector<ChargeEvent>& events, const std::vector<RejectedMessage>& rejected,
                      std::int64_t other_version, std::optional<Clock::time_point> give_up) {
    const retry::Backoff backoff(options.backoff);
    for (int failures = 0;; ++failures) {
      const auto started = Clock::now();
      auto result = store.Apply(options.topic, events, rejected, handler, options.gaps,
                                {.retention_days = options.retention_days,
                                 .progress_retention_days = options.progress_retention_days});
      if (result) {
        const auto& o = *result;
        probe.BatchApplied(Clock::now() - started);
        probe.Outcomes(o.applied, o.duplicates, o.held, o.released, o.rejected, other_version, o.expired);
        probe.Gaps(o.gaps);
        if (o.expired > 0) {
          spdlog::warn("inbox: {} event(s) not applied, too old (kept in inbox_expired; docs/inbox.md, \"Retention\")",
                       o.expired);
        }
        SetDatabaseOk(true);
        return true;
      }
      probe.BatchFailed();
      SetDatabaseOk(false);
      // Alone in its consumer, the loop waits the backoff's ceiling itself (retry/backoff.hpp says why).
      const auto wait = backoff.Ceiling(failures);
      spdlog::warn("inbox: batch of {} event(s) not applied ({}: {}); trying again in {} ms", events.size(),
                   db::ToString(result.error().code), result.error().detail, wait.count());
      UpdateLag();  // the lag keeps growing while the database is away: the gauge must say so
      if (give_up && Clock::now() + wait > *give_up) return false;
      if (!SleepUnlessStopping(wait)) return false;
      Turn();
    }
  }

  void CommitOffsets(bool synchronous) {
    if (applied.empty()) return;
    rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(static_cast<int>(applied.size()));
    for (const auto& [partition, offset] : applied) {
      rd_kafka_topic_partition_list_add(list, options.topic.c_str(), partition)->offset = offset;
    }
    const auto err = rd_kafka_commit(rk, list, synchronous ? 0 : 1);
    rd_kafka_topic_partition_list_destroy(list);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR && err != RD_KAFKA_RESP_ERR__NO_OFFSET) {
      probe.CommitFailed();
      spdlog::warn("inbox: offset commit failed: {} (the messages will be delivered again and recognised)",
                   rd_kafka_err2str(err));
    }
    applied.clear();
    UpdateLag();
  }

  void UpdateLag() {
    rd_kafka_topic_partition_list_t* assignment = nullptr;
    if (rd_kafka_assignment(rk, &assignment) != RD_KAFKA_RESP_ERR_NO_ERROR) return;
    rd_kafka_position(rk, assignment);
    std::int64_t total = 0;
    for (int i = 0; i < assignment->cnt; ++i) {
      const auto& p = assignment->elems[i];
      std::int64_t low = 0, high = 0;
      if (rd_kafka_get_watermark_offsets(rk, p.topic, p.partition, &low, &high) != RD_KAFKA_RESP_ERR_NO_ERROR) continue;
      const auto position = p.offset >= 0 ? p.offset : low;
      if (high > position) total += high - position;
    }
    rd_kafka_topic_partition_list_destroy(assignment);
    probe.LagChanged(total - lag);
    lag = total;
  }

  void Sweep() {
    if (options.gaps.policy == GapPolicy::kApply) {
      const auto result = store.ReleaseDue(handler, options.gaps, options.max_batch);
      if (result) {
        probe.Outcomes(result->applied, result->duplicates, 0, result->released, 0, 0, 0);
        probe.Gaps(result->gaps);
      } else {
        spdlog::warn("inbox: held events not looked at: {}", result.error().detail);
      }
    }
    if (const auto held = store.HeldCount()) probe.Held(*held);
    if (const auto expired = store.ExpiredCount()) probe.ExpiredKept(*expired);
  }

  void Retention() {
    const auto result = store.RunRetention({.retention_days = options.retention_days,
                                            .progress_retention_days = options.progress_retention_days,
                                            .partitions_ahead = options.partitions_ahead});
    if (!result) {
      spdlog::warn("inbox: retention did not run: {}", result.error().detail);
      return;
    }
    for (const auto& part : result->dropped) spdlog::info("inbox: retention dropped {}", part);
  }

  bool SleepUnlessStopping(milliseconds total) {
    const auto until = Clock::now() + total;
    while (Clock::now() < until) {
      if (stop_ != nullptr && stop_->load()) return false;
      // Until a time point, not for a count of milliseconds: a remainder truncated to 0 ms would spin.
      std::this_thread::sleep_until(std::min(until, Clock::now() + milliseconds{50}));
    }
    return true;
  }

  void SetDatabaseOk(bool ok) {
    std::lock_guard lock(status_mutex);
    status.database_ok = ok;
  }

  InboxOptions options;
  EventHandler& handler;
  InboxProbe& probe;
  PgInbox store;
  rd_kafka_t* rk = nullptr;
  const std::atomic<bool>* stop_ = nullptr;
  std::vector<Message> pending;  // read, not yet applied
  Offsets applied;               // applied, offsets (next to read) not yet committed
  int assigned = 0;        // partitions assigned to this consumer, as counted in the probe
  std::int64_t lag = 0;    // this consumer's share of the probe's lag
  bool fatal = false;
  mutable std::mutex status_mutex;
  InboxStatus status;
};

InboxConsumer::InboxConsumer(InboxOptions options, EventHandler& handler, InboxProbe& probe)
    : impl_(std::make_unique<Impl>(std::move(options), handler, probe)) {}

InboxConsumer::~InboxConsumer() = default;

int InboxConsumer::Run(const std::atomic<bool>& stop) { return impl_->Run(stop); }

InboxStatus InboxConsumer::Status() const {
  std::lock_guard lock(impl_->status_mutex);
  return impl_->status;
}

}  // namespace charge_outbox::inbox
