#include "inbox/pg/pg_inbox.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <ctime>
#include <cstdio>
#include <deque>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "charge_outbox/util/time.hpp"
#include "db/day_partitions.hpp"
#include "db/db_errors.hpp"
#include "db/text_rows.hpp"

namespace charge_outbox::inbox {
namespace {

using db::TextArray;

// The first key of the partitions' advisory locks ("ibx"), so they share no key with another user of
// advisory locks in the consumer's database that picks its own.
constexpr int kPartitionLockSpace = 0x696278;
// The retention pass's session lock ("iby").
constexpr int kRetentionLockSpace = 0x696279;

// Thrown inside a batch's transaction when another consumer moved one of its charges since the batch read
// it: the batch is rolled back and tried again (kUnavailable: nothing was written).
[[noreturn]] void MovedUnderUs(std::size_t expected, std::size_t moved) {
  throw db::DbException({db::DbErrc::kUnavailable,
                         "another consumer applied events of " + std::to_string(expected - moved) +
                             " of this batch's charges meanwhile (a rebalance); trying the batch again"});
}

// The handler's view of the inbox's transaction.
class HandlerTransaction final : public db::TextTransaction {
 public:
  explicit HandlerTransaction(pqxx::work& tx) : tx_(tx) {}
  db::TextRows Query(std::string_view sql, const db::TextParams& params) override {
    return db::ExecText(tx_, sql, params);
  }

 private:
  pqxx::work& tx_;
};

std::int64_t Micros(std::chrono::system_clock::time_point t) { return util::ToUnixMicros(t); }

// A timestamptz as COPY reads it, to the microsecond (the careful path's insert keeps microseconds too: a
// re-delivery must meet its first delivery's key exactly).
std::string PgTimestamp(std::chrono::system_clock::time_point t) {
  const std::int64_t micros = Micros(t);  // never negative: ParseChargeEvent refuses times before 1970
  const auto secs = static_cast<std::time_t>(micros / 1000000);
  std::tm utc{};
  gmtime_r(&secs, &utc);
  char buf[48];
  const int n = std::snprintf(buf, sizeof buf, "%04d-%02d-%02d %02d:%02d:%02d.%06d+00", utc.tm_year + 1900,
                              utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                              static_cast<int>(micros % 1000000));
  return std::string(buf, static_cast<std::size_t>(n));
}

// At most `limit` bytes of `text`, UTF-8 (the parser checked it), never cut inside a character: PostgreSQL
// refuses half of one, and with it the whole batch.
std::string_view Utf8Prefix(std::string_view text, std::size_t limit) {
  if (text.size() <= limit) return text;
  std::size_t end = limit;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;  // a continuation byte
  return text.substr(0, end);
}

// Keeps the batch's expired events for a person, once per record (a re-delivery adds nothing); returns
// how many are new.
std::int64_t KeepExpired(pqxx::work& tx, std::string_view topic, const std::vector<const ChargeEvent*>& expired) {
  const auto r = tx.exec_params(
      R"sql(
       INSERT INTO inbox_expired (topic, kafka_partition, kafka_offset, event_id, event_type, charge_id, sequence,
                                  event_time, record_time, payload)
        SELECT $1::text, u.k, u.o, u.id::uuid, u.ty, u.c, u.s, 'epoch'::timestamptz + u.t * interval '1 microsecond',
               'epoch'::timestamptz + NULLIF(u.r, -1) * interval '1 microsecond', u.p
          FROM unnest($2::int[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::int[], $8::bigint[],
                      $9::bigint[], $10::text[]) AS u(k, o, id, ty, c, s, t, r, p)
        ON CONFLICT DO NOTHING)sql",
      std::string(topic),
      db::TextArrayOf(expired, [](const ChargeEvent* e) { return static_cast<long long>(e->partition); }),
      db::TextArrayOf(expired, [](const ChargeEvent* e) { return static_cast<long long>(e->offset); }),
      db::TextArrayOf(expired, [](const ChargeEvent* e) { return std::string_view(e->event_id); }),
      db::TextArrayOf(expired, [](const ChargeEvent* e) { return std::string_view(e->event_type); }),
      db::TextArrayOf(expired, [](const ChargeEvent* e) { return std::string_view(e->charge_id); }),
      db::TextArrayOf(expired, [](const ChargeEvent* e) { return static_cast<long long>(e->sequence); }),
      db::TextArrayOf(expired, [](const ChargeEvent* e) { return static_cast<long long>(Micros(e->event_time)); }),
      // -1, NULL above, for a record without a timestamp: a record's own is never negative (inbox_consumer.cpp).
      db::TextArrayOf(expired,
                      [](const ChargeEvent* e) {
                        return e->record_time ? static_cast<long long>(Micros(*e->record_time)) : -1LL;
                      }),
      db::TextArrayOf(expired, [](const ChargeEvent* e) { return Utf8Prefix(e->payload, kExpiredPayloadLimit); }));
  return static_cast<std::int64_t>(r.affected_rows());
}

}  // namespace

PgInbox::PgInbox(std::string database_url, std::string application_name, db::ConnectionSettings settings)
    : connection_string_(db::ConnectionString(database_url, application_name, settings)) {}

PgInbox::~PgInbox() = default;

template <typename T, typename Job>
db::DbResult<T> PgInbox::Run(Job job) {
  try {
    if (!conn_ || !conn_->is_open()) {
      conn_.reset();
      conn_ = std::make_unique<pqxx::connection>(connection_string_);
    }
    return job(*conn_);
  } catch (...) {
    auto error = db::CurrentDbError();
    // A connection that failed mid-transaction may be unusable; the next call opens a new one.
    if (error.code != db::DbErrc::kFailed) conn_.reset();
    return error;
  }
}

BatchOutcome PgInbox::ApplyIn(pqxx::work& tx, const std::vector<const ChargeEvent*>& events,
                              std::vector<std::string> extra_charges, const std::vector<int>& extra_partitions,
                              EventHandler& handler, const GapOptions& gaps, bool careful) {
  BatchOutcome outcome;
  const auto now = std::chrono::system_clock::now();

  // Each charge's events, in arrival order.
  std::unordered_map<std::string, std::vector<Candidate>> charges;
  std::set<int> partitions(extra_partitions.begin(), extra_partitions.end());
  for (const auto* e : events) {
    charges[e->charge_id].push_back({.event = e, .held_since = std::nullopt});
    partitions.insert(e->partition);
  }
  for (auto& id : extra_charges) charges.try_emplace(std::move(id));
  if (charges.empty()) return outcome;
  std::vector<std::string> ids;
  ids.reserve(charges.size());
  for (const auto& [id, _] : charges) ids.push_back(id);
  const auto id_array = TextArray(ids);

  // Lock the batch's partitions, in order (so that two instances never wait on each other in a cycle):
  // every event of a charge comes on one partition, so two consumers that read one partition during a
  // rebalance take turns instead of racing. A handful of locks per batch, whatever its size: a lock per
  // charge would fill the server's lock table (max_locks_per_transaction). Correctness does not rest on
  // it: the progress update below checks what it read.
  std::vector<std::string> partition_list;
  for (const int p : partitions) partition_list.push_back(std::to_string(p));
  tx.exec_params("SELECT count(pg_advisory_xact_lock($2::int, p)) FROM unnest($1::int[]) AS p",
                 TextArray(partition_list), kPartitionLockSpace);
  // Progress, of the charges that may have some. A charge whose batch holds its sequence 1 is taken as new,
  // unread: a charge is almost always new when its first event comes. Should it have progress all the
  // same (a re-delivery), the event it applied before is in the inbox and the charge in inbox_charges,
  // so the inserts below collide and the batch comes again `careful`, reading every charge.
  std::vector<std::string> maybe_known;
  for (const auto& [id, arrived] : charges) {
    const bool has_first = std::any_of(arrived.begin(), arrived.end(),
                                       [](const Candidate& c) { return c.event->sequence == 1; });
    if (careful || !has_first) maybe_known.push_back(id);
  }
  std::unordered_map<std::string, int> last;
  if (!maybe_known.empty()) {
    for (const auto& row : tx.exec_params(
             "SELECT charge_id, last_sequence FROM inbox_charges WHERE charge_id = ANY($1::text[])",
             TextArray(maybe_known))) {
      last[row[0].as<std::string>()] = row[1].as<int>();
    }
  }

  // Held events of these charges: they go before this batch's.
  std::deque<ChargeEvent> held_events;
  std::unordered_map<std::string, std::vector<Candidate>> held_by_charge;
  for (const auto& row : tx.exec_params(
           R"sql(
            SELECT event_id::text, event_type, (extract(epoch FROM event_time) * 1000000)::bigint, charge_id,
                   sequence, payload, (extract(epoch FROM clock_timestamp() - held_at) * 1000)::bigint, kafka_partition
              FROM inbox_held WHERE charge_id = ANY($1::text[]) ORDER BY charge_id, sequence)sql",
           id_array)) {
    held_events.push_back({.event_id = row[0].as<std::string>(),
                           .event_type = row[1].as<std::string>(),
                           .event_time = util::FromUnixMicros(row[2].as<std::int64_t>()),
                           .charge_id = row[3].as<std::string>(),
                           .sequence = row[4].as<int>(),
                           .payload = row[5].as<std::string>(),
                           .partition = row[7].as<int>()});
    const auto age = std::chrono::milliseconds{row[6].as<std::int64_t>()};
    held_by_charge[held_events.back().charge_id].push_back(
        {.event = &held_events.back(), .held_since = now - std::max(age, std::chrono::milliseconds{0})});
  }

  std::vector<Step> steps;
  std::vector<const ChargeEvent*> hold;
  std::vector<std::string> unheld;  // event ids leaving inbox_held
  // Where the charges stand afterwards: rows to update (the charge was seen before) and to insert.
  std::vector<std::string> moved_ids, moved_sequences, moved_from, new_ids, new_sequences;
  for (auto& [id, arrived] : charges) {
    auto candidates = std::move(held_by_charge[id]);
    candidates.insert(candidates.end(), arrived.begin(), arrived.end());
    const auto found = last.find(id);
    const int before = found == last.end() ? 0 : found->second;
    const auto plan = PlanCharge(before, candidates, now, gaps);
    outcome.duplicates += static_cast<std::int64_t>(plan.duplicates.size());
    for (const auto* e : plan.drop_held) unheld.push_back(e->event_id);
    for (const auto& step : plan.apply) {
      steps.push_back(step);
      if (step.was_held) unheld.push_back(step.event->event_id);
    }
    hold.insert(hold.end(), plan.hold.begin(), plan.hold.end());
    if (plan.last_sequence != before) {
      if (found != last.end()) {
        moved_ids.push_back(id);
        moved_sequences.push_back(std::to_string(plan.last_sequence));
        moved_from.push_back(std::to_string(before));
      } else {
        new_ids.push_back(id);
        new_sequences.push_back(std::to_string(plan.last_sequence));
      }
    }
  }

  // The inbox rows first. Normally a plain COPY: under the partitions' locks, an event past `last` has
  // never been applied; ON CONFLICT would double the cost, and COPY writes the rows a page at a time where
  // INSERT ... SELECT writes them one by one (measured: COPY is the cheapest of the three). If an id is
  // there all the same (progress and inbox disagree), the copy fails, the caller rolls back and sends the
  // batch again `careful`: the primary key is then the final word, and such an event is a duplicate the
  // handler never sees.
  std::unordered_set<std::string> inserted;
  if (!steps.empty() && !careful) {
    pqxx::stream_to copy(tx, "inbox",
                         std::vector<std::string>{"event_id", "event_time", "charge_id", "sequence", "event_type",
                                                  "gap_before"});
    for (const auto& step : steps) {
      const auto gap = std::to_string(step.gap_before);
      copy << std::make_tuple(step.event->event_id.c_str(), PgTimestamp(step.event->event_time),
                              step.event->charge_id.c_str(), step.event->sequence, step.event->event_type.c_str(),
                              step.gap_before > 0 ? gap.c_str() : static_cast<const char*>(nullptr));
    }
    copy.complete();
  } else if (!steps.empty()) {
    const auto r = tx.exec_params(
        R"sql(
         INSERT INTO inbox (event_id, event_time, charge_id, sequence, event_type, gap_before)
          SELECT u.id::uuid, 'epoch'::timestamptz + u.t * interval '1 microsecond', u.c, u.s, u.ty, NULLIF(u.g, 0)
            FROM unnest($1::text[], $2::bigint[], $3::text[], $4::int[], $5::text[], $6::int[]) AS u(id, t, c, s, ty, g)
          ON CONFLICT DO NOTHING RETURNING event_id::text)sql",
        db::TextArrayOf(steps, [](const Step& s) { return std::string_view(s.event->event_id); }),
        db::TextArrayOf(steps, [](const Step& s) { return static_cast<long long>(Micros(s.event->event_time)); }),
        db::TextArrayOf(steps, [](const Step& s) { return std::string_view(s.event->charge_id); }),
        db::TextArrayOf(steps, [](const Step& s) { return static_cast<long long>(s.event->sequence); }),
        db::TextArrayOf(steps, [](const Step& s) { return std::string_view(s.event->event_type); }),
        db::TextArrayOf(steps, [](const Step& s) { return static_cast<long long>(s.gap_before); }));
    for (const auto& row : r) inserted.insert(row[0].as<std::string>());
  }
  std::vector<const ChargeEvent*> to_apply;
  std::vector<const Step*> gapped;
  for (const auto& step : steps) {
    if (careful) {
      // Postgres prints uuids in lower case; the id we were given may not be.
      std::string lower = step.event->event_id;
      for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (!inserted.contains(lower)) {
        ++outcome.duplicates;
        continue;
      }
    }
    to_apply.push_back(step.event);
    if (step.was_held) ++outcome.released;
    if (step.gap_before > 0) gapped.push_back(&step);
  }
  outcome.applied = static_cast<std::int64_t>(to_apply.size());
  // Progress moves only from where this batch read it: an update (HOT: no indexed column changes) of the
  // rows read above, still at the sequence read, and a plain insert for new charges. If another consumer
  // moved or created one meanwhile, the update misses it or the insert collides (after waiting for that
  // consumer's commit, in both cases), and the whole batch is rolled back. Written before the handler is
  // called, so that a charge taken as new wrongly (above) is found out before the handler sees its events.
  if (!moved_ids.empty()) {
    const auto r = tx.exec_params(
        R"sql(
         UPDATE inbox_charges c SET last_sequence = u.s, updated_at = now()
           FROM unnest($1::text[], $2::int[], $3::int[]) AS u(id, s, b)
          WHERE c.charge_id = u.id AND c.last_sequence = u.b)sql",
        TextArray(moved_ids), TextArray(moved_sequences), TextArray(moved_from));
    if (r.affected_rows() != moved_ids.size()) MovedUnderUs(moved_ids.size(), r.affected_rows());
  }
  if (!new_ids.empty()) {
    // A collision here is a unique violation: Apply sends the batch again, which then reads the row.
    tx.exec_params("INSERT INTO inbox_charges (charge_id, last_sequence) SELECT * FROM unnest($1::text[], $2::int[])",
                   TextArray(new_ids), TextArray(new_sequences));
  }
  if (!to_apply.empty()) {
    HandlerTransaction handler_tx(tx);
    handler.Apply(handler_tx, to_apply);
  }

  if (!hold.empty()) {
    const auto r = tx.exec_params(
        R"sql(
         INSERT INTO inbox_held (event_id, event_time, charge_id, sequence, event_type, payload, kafka_partition)
          SELECT u.id::uuid, 'epoch'::timestamptz + u.t * interval '1 microsecond', u.c, u.s, u.ty, u.p, u.k
            FROM unnest($1::text[], $2::bigint[], $3::text[], $4::int[], $5::text[], $6::text[], $7::int[])
              AS u(id, t, c, s, ty, p, k)
          ON CONFLICT DO NOTHING)sql",
        db::TextArrayOf(hold, [](const ChargeEvent* e) { return std::string_view(e->event_id); }),
        db::TextArrayOf(hold, [](const ChargeEvent* e) { return static_cast<long long>(Micros(e->event_time)); }),
        db::TextArrayOf(hold, [](const ChargeEvent* e) { return std::string_view(e->charge_id); }),
        db::TextArrayOf(hold, [](const ChargeEvent* e) { return static_cast<long long>(e->sequence); }),
        db::TextArrayOf(hold, [](const ChargeEvent* e) { return std::string_view(e->event_type); }),
        db::TextArrayOf(hold, [](const ChargeEvent* e) { return std::string_view(e->payload); }),
        db::TextArrayOf(hold, [](const ChargeEvent* e) { return static_cast<long long>(e->partition); }));
    outcome.held = static_cast<std::int64_t>(r.affected_rows());
    outcome.duplicates += static_cast<std::int64_t>(hold.size()) - outcome.held;
  }
  if (!unheld.empty()) {
    tx.exec_params("DELETE FROM inbox_held WHERE event_id = ANY($1::uuid[])", TextArray(unheld));
  }
  if (!gapped.empty()) {
    tx.exec_params(
        R"sql(
         INSERT INTO inbox_gaps (charge_id, after_sequence, before_sequence, event_id)
          SELECT u.c, u.s - u.g - 1, u.s, u.id::uuid
            FROM unnest($1::text[], $2::int[], $3::int[], $4::text[]) AS u(c, s, g, id)
          ON CONFLICT DO NOTHING)sql",
        db::TextArrayOf(gapped, [](const Step* s) { return std::string_view(s->event->charge_id); }),
        db::TextArrayOf(gapped, [](const Step* s) { return static_cast<long long>(s->event->sequence); }),
        db::TextArrayOf(gapped, [](const Step* s) { return static_cast<long long>(s->gap_before); }),
        db::TextArrayOf(gapped, [](const Step* s) { return std::string_view(s->event->event_id); }));
    outcome.gaps = static_cast<std::int64_t>(gapped.size());
    for (const auto* s : gapped) {
      spdlog::warn("charge {}: applied sequence {} past a gap of {} event(s) (see inbox_gaps)", s->event->charge_id,
                   s->event->sequence, s->gap_before);
    }
  }
  return outcome;
}

db::DbResult<BatchOutcome> PgInbox::Apply(std::string_view topic, const std::vector<ChargeEvent>& events,
                                          const std::vector<RejectedMessage>& rejected, EventHandler& handler,
                                          const GapOptions& gaps, const EventExpiry& expiry) {
  auto result = ApplyOnce(topic, events, rejected, handler, gaps, expiry, /*careful=*/false);
  if (result || result.error().code != db::DbErrc::kFailed || result.error().detail.rfind("23505", 0) != 0) {
    return result;
  }
  // A row of the batch exists already: an event in the inbox (progress and inbox disagree), or a charge
  // another consumer instance created meanwhile. Once more, with the inbox insert skipping known ids.
  spdlog::warn("inbox: a row of the batch exists already ({}); trying the batch again", result.error().detail);
  return ApplyOnce(topic, events, rejected, handler, gaps, expiry, /*careful=*/true);
}

db::DbResult<BatchOutcome> PgInbox::ApplyOnce(std::string_view topic, const std::vector<ChargeEvent>& events,
                                              const std::vector<RejectedMessage>& rejected, EventHandler& handler,
                                              const GapOptions& gaps, const EventExpiry& expiry, bool careful) {
  return Run<BatchOutcome>([&](pqxx::connection& conn) {
    // By the record's time, as the topic's retention goes: an event the topic still holds is never too
    // old, however old its ce_time (an event published late, a new group reading from the start). And by
    // its own time past progress retention, where its charge's progress may be gone: an old event sent
    // again as a new record (a replay from an archive) could no longer be recognised.
    const auto now = std::chrono::system_clock::now();
    const auto record_horizon = now - std::chrono::hours{24} * expiry.retention_days;
    const auto event_horizon = now - std::chrono::hours{24} * expiry.progress_retention_days;
    std::vector<const ChargeEvent*> current;
    std::vector<const ChargeEvent*> expired;
    current.reserve(events.size());
    for (const auto& e : events) {
      const bool too_old = e.record_time.value_or(e.event_time) < record_horizon || e.event_time < event_horizon;
      (too_old ? expired : current).push_back(&e);
    }
    pqxx::work tx(conn);
    auto outcome = ApplyIn(tx, current, {}, {}, handler, gaps, careful);
    if (!expired.empty()) outcome.expired = KeepExpired(tx, topic, expired);
    if (!rejected.empty()) {
      const auto r = tx.exec_params(
          R"sql(
           INSERT INTO inbox_rejected (topic, kafka_partition, kafka_offset, reason, message_key, value)
            SELECT * FROM unnest($1::text[], $2::int[], $3::bigint[], $4::text[], $5::text[], $6::text[])
            ON CONFLICT DO NOTHING)sql",
          db::TextArrayOf(rejected, [](const RejectedMessage& m) { return std::string_view(m.topic); }),
          db::TextArrayOf(rejected, [](const RejectedMessage& m) { return static_cast<long long>(m.partition); }),
          db::TextArrayOf(rejected, [](const RejectedMessage& m) { return static_cast<long long>(m.offset); }),
          db::TextArrayOf(rejected, [](const RejectedMessage& m) { return std::string_view(m.reason); }),
          db::TextArrayOf(rejected, [](const RejectedMessage& m) { return std::string_view(m.key); }),
          db::TextArrayOf(rejected, [](const RejectedMessage& m) { return std::string_view(m.value); }));
      outcome.rejected = static_cast<std::int64_t>(r.affected_rows());
    }
    tx.commit();
    return outcome;
  });
}

db::DbResult<BatchOutcome> PgInbox::ReleaseDue(EventHandler& handler, const GapOptions& gaps, int limit) {
  return Run<BatchOutcome>([&](pqxx::connection& conn) {
    if (gaps.policy == GapPolicy::kHold) return BatchOutcome{};
    pqxx::work tx(conn);
    std::vector<std::string> due;
    std::vector<int> partitions;
    for (const auto& row : tx.exec_params(
             R"sql(
              SELECT DISTINCT charge_id, kafka_partition FROM inbox_held
               WHERE held_at <= clock_timestamp() - $1::bigint * interval '1 millisecond' LIMIT $2)sql",
             static_cast<std::int64_t>(gaps.wait.count()), limit)) {
      due.push_back(row[0].as<std::string>());
      partitions.push_back(row[1].as<int>());
    }
    auto outcome = ApplyIn(tx, {}, std::move(due), partitions, handler, gaps, /*careful=*/true);
    tx.commit();
    return outcome;
  });
}

db::DbResult<std::int64_t> PgInbox::HeldCount() {
  return Run<std::int64_t>([](pqxx::connection& conn) {
    pqxx::nontransaction tx(conn);
    return tx.exec1("SELECT count(*) FROM inbox_held")[0].as<std::int64_t>();
  });
}

db::DbResult<std::int64_t> PgInbox::ExpiredCount() {
  return Run<std::int64_t>([](pqxx::connection& conn) {
    pqxx::nontransaction tx(conn);
    return tx.exec_params1("SELECT count(*) FROM (SELECT 1 FROM inbox_expired LIMIT $1) AS kept", kExpiredCountLimit)[0]
        .as<std::int64_t>();
  });
}

db::DbResult<RetentionReport> PgInbox::RunRetention(const InboxRetention& policy) {
  return Run<RetentionReport>([&](pqxx::connection& conn) {
    RetentionReport report;
    const auto pass =
        db::BeginRetentionPass(conn, kRetentionLockSpace, "inbox", policy.partitions_ahead);
    report.skipped = !pass;
    if (!pass) return report;
    report.partitions_created = pass->partitions_created;
    for (const auto& part : db::PastRetention(pass->days, "inbox", policy.retention_days)) {
      try {
        pqxx::work tx(conn);
        tx.exec("SET LOCAL lock_timeout = '" + std::to_string(policy.lock_timeout.count()) + "ms'");
        tx.exec_params("SELECT inbox_drop_day($1)", part);  // the owner's DDL (sql/inbox/0003)
        tx.commit();
        report.dropped.push_back(part);
      } catch (const pqxx::sql_error& e) {
        if (e.sqlstate() != "55P03") throw;  // lock_not_available: the next pass tries again
      }
    }
    pqxx::work tx(conn);
    tx.exec_params(
        R"sql(
         DELETE FROM inbox_default
          WHERE event_time < ((now() AT TIME ZONE 'UTC')::date - $1::int)::timestamp AT TIME ZONE 'UTC')sql",
        policy.retention_days);
    report.progress_forgotten = static_cast<std::int64_t>(
        tx.exec_params("DELETE FROM inbox_charges WHERE updated_at < now() - $1::int * interval '1 day'",
                       policy.progress_retention_days)
            .affected_rows());
    tx.exec_params("DELETE FROM inbox_gaps WHERE detected_at < now() - $1::int * interval '1 day'",
                   policy.progress_retention_days);
    tx.commit();
    return report;
  });
}

}  // namespace charge_outbox::inbox
