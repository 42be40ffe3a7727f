// PgInbox against a real PostgreSQL with the inbox's own migrations: each event applied once, in sequence
// order per charge, held past a gap and released by the missing event or (policy apply) after the wait,
// the whole batch rolled back with a failing handler, old events expired by their record's time and kept
// for a person, rejected messages kept, retention by day partitions, and two instances applying the same
// charges at once.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <pqxx/pqxx>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "charge_outbox/db/migrations.hpp"
#include "charge_outbox/inbox/inbox.hpp"
#include "charge_outbox/util/time.hpp"
#include "inbox/pg/pg_inbox.hpp"
#include "pg_test_database.hpp"

namespace charge_outbox::inbox {
namespace {

using namespace std::chrono_literals;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using testing::PgTestDatabase;

constexpr const char* kTopic = "charge-events";
constexpr int kRetentionDays = 14;
constexpr int kProgressRetentionDays = 180;
const EventExpiry kExpiry{.retention_days = kRetentionDays, .progress_retention_days = kProgressRetentionDays};
const GapOptions kWaitLong{.policy = GapPolicy::kApply, .wait = std::chrono::hours{1}};

// Writes each applied event into `applied`, in the order it is given them (n), through the inbox's
// transaction; with `fail` set it throws db::DbException after writing, as a handler does when its
// database refuses a statement.
class RecordingHandler final : public EventHandler {
 public:
  void Apply(db::TextTransaction& tx, const std::vector<const ChargeEvent*>& events) override {
    ++calls;
    std::vector<std::string> ids, charges, sequences;
    for (const auto* e : events) {
      ids.push_back(e->event_id);
      charges.push_back(e->charge_id);
      sequences.push_back(std::to_string(e->sequence));
    }
    tx.Query(
        "INSERT INTO applied (event_id, charge_id, sequence)"
        " SELECT id, c, s FROM unnest($1::text[], $2::text[], $3::int[]) WITH ORDINALITY AS u(id, c, s, n) ORDER BY n",
        {db::TextArray(ids), db::TextArray(charges), db::TextArray(sequences)});
    if (fail) throw db::DbException({.code = db::DbErrc::kUnavailable, .detail = "the projection's table is locked"});
  }
  std::atomic<int> calls{0};
  bool fail = false;
};

std::string Uuid(int n) {
  char buf[37];
  std::snprintf(buf, sizeof buf, "00000000-0000-4000-8000-%012x", n);
  return buf;
}

// When the tests' events happened: one time for all, as a re-delivery carries its first delivery's ce_time.
const std::chrono::system_clock::time_point kEventTime = std::chrono::system_clock::now();

// Event `sequence` of charge `charge`; its id is derived from both, so a re-delivery has the same id.
ChargeEvent Event(int charge, int sequence, std::chrono::system_clock::time_point time = kEventTime) {
  const auto charge_id = "ch_" + std::to_string(charge);
  return {.event_id = Uuid(charge * 100 + sequence),
          .event_type = "payments.charge.captured.v1",
          .event_time = time,
          .charge_id = charge_id,
          .sequence = sequence,
          .payload = R"({"id":")" + charge_id + R"(","sequence":)" + std::to_string(sequence) + "}"};
}

class PgInboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = PgTestDatabase::Create(::testing::UnitTest::GetInstance()->current_test_info()->name(),
                                 PgTestDatabase::Schema::kEmpty);
    db::Migrator(db_->url(), InboxMigrations(), {.ledger = kInboxLedger}).Up();
    db_->Execute("CREATE TABLE applied (n bigserial PRIMARY KEY, event_id text NOT NULL, charge_id text NOT NULL,"
                 " sequence int NOT NULL)");
  }

  std::unique_ptr<PgInbox> Open() { return std::make_unique<PgInbox>(db_->url(), "pg-inbox-test", db::ConnectionSettings{}); }

  BatchOutcome Apply(PgInbox& inbox, const std::vector<ChargeEvent>& events, const GapOptions& gaps = kWaitLong,
                     const std::vector<RejectedMessage>& rejected = {}) {
    auto result = inbox.Apply(kTopic, events, rejected, handler_, gaps, kExpiry);
    EXPECT_TRUE(result.has_value()) << (result ? "" : result.error().detail);
    return result ? *result : BatchOutcome{};
  }

  // The sequences the handler applied for one charge, in the order it applied them.
  std::vector<int> AppliedSequences(int charge) {
    pqxx::connection conn(db_->url());
    pqxx::nontransaction tx(conn);
    std::vector<int> out;
    for (const auto& row : tx.exec_params("SELECT sequence FROM applied WHERE charge_id = $1 ORDER BY n",
                                          "ch_" + std::to_string(charge))) {
      out.push_back(row[0].as<int>());
    }
    return out;
  }
  int Count(const std::string& table) { return std::stoi(db_->Scalar("SELECT count(*) FROM " + table)); }
  std::string LastSequence(int charge) {
    return db_->Scalar("SELECT last_sequence FROM inbox_charges WHERE charge_id = 'ch_" + std::to_string(charge) + "'");
  }

  std::unique_ptr<PgTestDatabase> db_;
  RecordingHandler handler_;
};

TEST_F(PgInboxTest, ABatchAppliesEachEventOnceAndAgainAppliesNothing) {
  auto inbox = Open();
  const std::vector<ChargeEvent> batch{Event(1, 1), Event(1, 2), Event(2, 1), Event(1, 3)};
  const auto first = Apply(*inbox, batch);
  EXPECT_EQ(first.applied, 4);
  EXPECT_EQ(first.duplicates, 0);
  EXPECT_EQ(first.held, 0);
  EXPECT_THAT(AppliedSequences(1), ElementsAre(1, 2, 3));
  EXPECT_THAT(AppliedSequences(2), ElementsAre(1));
  EXPECT_EQ(Count("inbox"), 4);
  EXPECT_EQ(LastSequence(1), "3");
  EXPECT_EQ(LastSequence(2), "1");
  EXPECT_EQ(handler_.calls, 1);

  const auto again = Apply(*inbox, batch);
  EXPECT_EQ(again.applied, 0);
  EXPECT_EQ(again.duplicates, 4);
  EXPECT_EQ(Count("applied"), 4);
  EXPECT_EQ(Count("inbox"), 4);
  EXPECT_EQ(handler_.calls, 1) << "the handler is not called with nothing to apply";

  // The same event twice in one batch.
  const auto twice = Apply(*inbox, {Event(3, 1), Event(3, 1)});
  EXPECT_EQ(twice.applied, 1);
  EXPECT_EQ(twice.duplicates, 1);
  EXPECT_THAT(AppliedSequences(3), ElementsAre(1));
}

TEST_F(PgInboxTest, AnEventWhoseIdIsInTheInboxIsNotAppliedEvenIfProgressWasLost) {
  auto inbox = Open();
  Apply(*inbox, {Event(1, 1)});
  // Progress forgotten (retention) while the inbox row is still there: the primary key is the last word.
  db_->Execute("DELETE FROM inbox_charges");
  const auto again = Apply(*inbox, {Event(1, 1)});
  EXPECT_EQ(again.applied, 0);
  EXPECT_EQ(again.duplicates, 1);
  EXPECT_THAT(AppliedSequences(1), ElementsAre(1));
}

TEST_F(PgInboxTest, AnUpperCaseIdIsRecognisedOnRedelivery) {
  auto inbox = Open();
  auto upper = Event(1, 1);
  upper.event_id = "ABCDEF00-0000-4000-8000-0000000000AA";
  EXPECT_EQ(Apply(*inbox, {upper}).applied, 1);
  db_->Execute("DELETE FROM inbox_charges");
  const auto again = Apply(*inbox, {upper});
  EXPECT_EQ(again.applied, 0);
  EXPECT_EQ(again.duplicates, 1);
  EXPECT_EQ(Count("applied"), 1);

  // A new upper-case id beside one that is in the inbox already: the first is applied, the second not.
  auto other = Event(2, 1);
  other.event_id = "ABCDEF00-0000-4000-8000-0000000000BB";
  db_->Execute("DELETE FROM inbox_charges");
  const auto mixed = Apply(*inbox, {upper, other});
  EXPECT_EQ(mixed.applied, 1);
  EXPECT_EQ(mixed.duplicates, 1);
  EXPECT_THAT(AppliedSequences(2), ElementsAre(1));
  EXPECT_EQ(Count("applied"), 2);
}

TEST_F(PgInboxTest, AnOutOfOrderBatchAppliesInSequenceOrder) {
  auto inbox = Open();
  const auto outcome = Apply(*inbox, {Event(1, 2), Event(1, 1)});
  EXPECT_EQ(outcome.applied, 2);
  EXPECT_EQ(outcome.held, 0);
  EXPECT_THAT(AppliedSequences(1), ElementsAre(1, 2));
}

TEST_F(PgInboxTest, AGappedEventIsHeldAndReleasedByTheBatchCarryingTheMissingOne) {
  auto inbox = Open();
  const auto first = Apply(*inbox, {Event(1, 1), Event(1, 3), Event(1, 4)});
  EXPECT_EQ(first.applied, 1);
  EXPECT_EQ(first.held, 2);
  EXPECT_THAT(AppliedSequences(1), ElementsAre(1));
  EXPECT_EQ(db_->Scalar("SELECT string_agg(sequence::text, ',' ORDER BY sequence) FROM inbox_held"), "3,4");
  EXPECT_EQ(db_->Scalar("SELECT payload FROM inbox_held WHERE sequence = 3"), Event(1, 3).payload);
  EXPECT_EQ(inbox->HeldCount().value(), 2);
  EXPECT_EQ(LastSequence(1), "1");

  // Delivered again while held: neither applied nor held twice.
  const auto redelivered = Apply(*inbox, {Event(1, 3)});
  EXPECT_EQ(redelivered.applied, 0);
  EXPECT_EQ(redelivered.held, 0);
  EXPECT_EQ(redelivered.duplicates, 1);
  EXPECT_EQ(Count("inbox_held"), 2);

  const auto filled = Apply(*inbox, {Event(1, 2)});
  EXPECT_EQ(filled.applied, 3);
  EXPECT_EQ(filled.released, 2);
  EXPECT_EQ(filled.gaps, 0);
  EXPECT_THAT(AppliedSequences(1), ElementsAre(1, 2, 3, 4));
  EXPECT_EQ(Count("inbox_held"), 0);
  EXPECT_EQ(Count("inbox_gaps"), 0);
  EXPECT_EQ(Count("inbox"), 4);
  EXPECT_EQ(LastSequence(1), "4");
  // The released events' payloads reached the handler from inbox_held, with their own time.
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM inbox WHERE gap_before IS NOT NULL"), "0");
}

TEST_F(PgInboxTest, ReleaseDueAppliesPastTheGapAfterTheWaitAndRecordsIt) {
  auto inbox = Open();
  const GapOptions gaps{.policy = GapPolicy::kApply, .wait = 300ms};
  const auto held_at = std::chrono::system_clock::now() - 1h;
  EXPECT_EQ(Apply(*inbox, {Event(1, 1), Event(1, 4, held_at), Event(1, 5)}, gaps).held, 2);
  // A charge with nothing held is not touched.
  EXPECT_EQ(Apply(*inbox, {Event(2, 1)}, gaps).applied, 1);

  const auto early = inbox->ReleaseDue(handler_, gaps, 100).value();
  EXPECT_EQ(early.applied, 0);
  EXPECT_EQ(Count("inbox_held"), 2);

  std::this_thread::sleep_for(400ms);
  // The hold policy never applies past a gap, however long it waited.
  const auto hold = inbox->ReleaseDue(handler_, {.policy = GapPolicy::kHold, .wait = 0ms}, 100).value();
  EXPECT_EQ(hold.applied, 0);
  EXPECT_EQ(Count("inbox_held"), 2);

  const auto due = inbox->ReleaseDue(handler_, gaps, 100).value();
  EXPECT_EQ(due.applied, 2);
  EXPECT_EQ(due.released, 2);
  EXPECT_EQ(due.gaps, 1);
  EXPECT_THAT(AppliedSequences(1), ElementsAre(1, 4, 5));
  EXPECT_EQ(Count("inbox_held"), 0);
  EXPECT_EQ(LastSequence(1), "5");
  EXPECT_EQ(db_->Scalar("SELECT charge_id || ':' || after_sequence || '-' || before_sequence || ':' || event_id"
                        " FROM inbox_gaps"),
            "ch_1:1-4:" + Event(1, 4).event_id);
  EXPECT_EQ(db_->Scalar("SELECT gap_before FROM inbox WHERE sequence = 4"), "2");
  // The held event kept its own time (the inbox's partition key).
  EXPECT_EQ(db_->Scalar("SELECT (event_time < now() - interval '59 minutes')::text FROM inbox WHERE sequence = 4"), "true");

  // The missing events arriving after all are duplicates: the charge has moved past them.
  const auto late = Apply(*inbox, {Event(1, 2), Event(1, 3)}, gaps);
  EXPECT_EQ(late.applied, 0);
  EXPECT_EQ(late.duplicates, 2);
  EXPECT_THAT(AppliedSequences(1), ElementsAre(1, 4, 5));
  EXPECT_THAT(AppliedSequences(2), ElementsAre(1));
}

// A batch holding a charge's sequence 1 takes the charge as new without reading its progress (the common
// case, made cheap); these are the cases where it is not new, and the handler must still never see them.
TEST_F(PgInboxTest, ASequenceOneOfAChargeThatMovedOnIsADuplicateTheHandlerNeverSees) {
  auto inbox = Open();
  const GapOptions gaps{.policy = GapPolicy::kApply, .wait = 100ms};
  // Charge 1's sequence 1 never came: its 2 is applied past the gap.
  EXPECT_EQ(Apply(*inbox, {Event(1, 2)}, gaps).held, 1);
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(inbox->ReleaseDue(handler_, gaps, 100).value().applied, 1);
  // Charge 2 applied its 1.
  EXPECT_EQ(Apply(*inbox, {Event(2, 1)}, gaps).applied, 1);
  const int calls = handler_.calls;

  // Now charge 1's 1 comes late (it is not in the inbox: only progress says it is behind), and charge 2's
  // 1 again with its 2.
  const auto late = Apply(*inbox, {Event(1, 1), Event(2, 1), Event(2, 2)}, gaps);
  EXPECT_EQ(late.applied, 1);
  EXPECT_EQ(late.duplicates, 2);
  EXPECT_THAT(AppliedSequences(1), ElementsAre(2));
  EXPECT_THAT(AppliedSequences(2), ElementsAre(1, 2));
  EXPECT_EQ(handler_.calls, calls + 1);  // once, for charge 2's sequence 2 alone
  EXPECT_EQ(LastSequence(1), "2");
  EXPECT_EQ(LastSequence(2), "2");

  // Charge 1's 1 alone: nothing in the inbox gives it away, only the charge's progress, and the handler is
  // not called even once (not even in a transaction rolled back afterwards).
  const auto alone = Apply(*inbox, {Event(1, 1)}, gaps);
  EXPECT_EQ(alone.applied, 0);
  EXPECT_EQ(alone.duplicates, 1);
  EXPECT_EQ(handler_.calls, calls + 1);
  EXPECT_THAT(AppliedSequences(1), ElementsAre(2));
}

TEST_F(PgInboxTest, AFailingHandlerRollsTheWholeBatchBackAndTheRetrySucceeds) {
  auto inbox = Open();
  Apply(*inbox, {Event(9, 1)});
  const std::vector<ChargeEvent> batch{Event(1, 1), Event(1, 3), Event(2, 1), Event(9, 2)};
  const std::vector<RejectedMessage> rejected{{.topic = "charge-events", .partition = 0, .offset = 7, .reason = "r", .key = "k", .value = "v"}};
  handler_.fail = true;
  const auto failed = inbox->Apply(kTopic, batch, rejected, handler_, kWaitLong, kExpiry);
  ASSERT_FALSE(failed.has_value());
  EXPECT_EQ(failed.error().code, db::DbErrc::kUnavailable);
  EXPECT_EQ(Count("applied"), 1);
  EXPECT_EQ(Count("inbox"), 1);
  EXPECT_EQ(Count("inbox_held"), 0);
  EXPECT_EQ(Count("inbox_rejected"), 0);
  EXPECT_EQ(Count("inbox_charges"), 1);
  EXPECT_EQ(LastSequence(9), "1");

  handler_.fail = false;
  const auto retried = inbox->Apply(kTopic, batch, rejected, handler_, kWaitLong, kExpiry).value();
  EXPECT_EQ(retried.applied, 3);
  EXPECT_EQ(retried.held, 1);
  EXPECT_EQ(retried.rejected, 1);
  EXPECT_THAT(AppliedSequences(1), ElementsAre(1));
  EXPECT_THAT(AppliedSequences(2), ElementsAre(1));
  EXPECT_THAT(AppliedSequences(9), ElementsAre(1, 2));
  EXPECT_EQ(Count("inbox_held"), 1);
}

// Issue 41: the topic keeps a record by its own timestamp, so the inbox expires by it too. An event whose
// ce_time is past the inbox's window but whose record is recent (an event parked and published two weeks
// late, a new consumer group reading from the start) is applied, not dropped.
TEST_F(PgInboxTest, AnEventPublishedLateIsAppliedByItsRecordsTime) {
  auto inbox = Open();
  const auto now = std::chrono::system_clock::now();
  auto late = Event(1, 1, now - 24h * (kRetentionDays + 16));
  late.record_time = now - 1min;
  const auto outcome = Apply(*inbox, {late, Event(2, 1)});
  EXPECT_EQ(outcome.expired, 0);
  EXPECT_EQ(outcome.applied, 2);
  EXPECT_THAT(AppliedSequences(1), ElementsAre(1));
  EXPECT_EQ(LastSequence(1), "1");
  EXPECT_EQ(Count("inbox_expired"), 0);
  // Its inbox row is in its own day, by ce_time, as a re-delivery of it will be.
  EXPECT_EQ(db_->Scalar("SELECT (event_time < now() - interval '29 days')::text FROM inbox WHERE charge_id = 'ch_1'"),
            "true");
}

// Such an event's inbox row lies in a day past retention, which drops it; a re-delivery of its record comes
// within the topic's retention of it, and so while its charge's progress is kept: recognised by progress,
// never seen by the handler, on the path that reads progress and on the one that takes a sequence 1 as new.
TEST_F(PgInboxTest, ALateEventsRedeliveryIsRecognisedByProgressOnceItsInboxRowIsDropped) {
  auto inbox = Open();
  const auto now = std::chrono::system_clock::now();
  const auto late = [&](int charge, int sequence) {
    auto e = Event(charge, sequence, now - 24h * (kRetentionDays + 16));
    e.record_time = now - 1h;
    return e;
  };
  EXPECT_EQ(Apply(*inbox, {late(1, 1), late(2, 1), late(2, 2)}).applied, 3);
  inbox->RunRetention({.retention_days = kRetentionDays, .progress_retention_days = kProgressRetentionDays}).value();
  ASSERT_EQ(Count("inbox"), 0) << "retention should have deleted the rows of days past it";
  const int calls = handler_.calls;

  const auto again = Apply(*inbox, {late(1, 1), late(2, 2)});
  EXPECT_EQ(again.applied, 0);
  EXPECT_EQ(again.duplicates, 2);
  EXPECT_EQ(again.expired, 0);
  EXPECT_EQ(handler_.calls, calls);
  EXPECT_THAT(AppliedSequences(1), ElementsAre(1));
  EXPECT_THAT(AppliedSequences(2), ElementsAre(1, 2));
}

// A record older than the inbox's window is still on the topic only if the topic keeps longer than the
// inbox: not applied, and kept whole for a person in inbox_expired, beside the counter.
TEST_F(PgInboxTest, AnEventWhoseRecordIsPastRetentionIsKeptInInboxExpiredNotApplied) {
  auto inbox = Open();
  const auto now = std::chrono::system_clock::now();
  auto old = Event(1, 2, now - 24h * (kRetentionDays + 2));
  old.record_time = now - 24h * (kRetentionDays + 1);
  old.partition = 3;
  old.offset = 41;
  auto current = Event(2, 1);
  current.record_time = now;
  current.partition = 3;
  current.offset = 42;
  const auto outcome = Apply(*inbox, {old, current});
  EXPECT_EQ(outcome.expired, 1);
  EXPECT_EQ(outcome.applied, 1);
  EXPECT_EQ(outcome.held, 0);
  EXPECT_THAT(AppliedSequences(1), IsEmpty());
  EXPECT_THAT(AppliedSequences(2), ElementsAre(1));
  EXPECT_EQ(LastSequence(1), "");
  EXPECT_EQ(Count("inbox_held"), 0);
  EXPECT_EQ(db_->Scalar("SELECT concat_ws('|', topic, kafka_partition, kafka_offset, event_id, event_type, charge_id,"
                        " sequence, payload) FROM inbox_expired"),
            std::string(kTopic) + "|3|41|" + old.event_id + "|payments.charge.captured.v1|ch_1|2|" + old.payload);
  EXPECT_EQ(db_->Scalar("SELECT (extract(epoch FROM event_time) * 1000000)::bigint FROM inbox_expired"),
            std::to_string(util::ToUnixMicros(old.event_time)));
  EXPECT_EQ(db_->Scalar("SELECT (extract(epoch FROM record_time) * 1000000)::bigint FROM inbox_expired"),
            std::to_string(util::ToUnixMicros(*old.record_time)));
  EXPECT_EQ(db_->Scalar("SELECT (seen_at > now() - interval '1 minute')::text FROM inbox_expired"), "true");
  EXPECT_EQ(inbox->ExpiredCount().value(), 1);

  // Read again (a re-delivery): kept once, counted once.
  EXPECT_EQ(Apply(*inbox, {old}).expired, 0);
  EXPECT_EQ(Count("inbox_expired"), 1);
  EXPECT_THAT(AppliedSequences(1), IsEmpty());
}

// Without a record timestamp (an old message format) the event's own time stands in for it.
TEST_F(PgInboxTest, AnEventWithoutARecordTimeExpiresByItsOwnTime) {
  auto inbox = Open();
  const auto old = std::chrono::system_clock::now() - 24h * (kRetentionDays + 1);
  const auto outcome = Apply(*inbox, {Event(1, 1, old), Event(2, 1)});
  EXPECT_EQ(outcome.expired, 1);
  EXPECT_EQ(outcome.applied, 1);
  EXPECT_THAT(AppliedSequences(1), IsEmpty());
  EXPECT_THAT(AppliedSequences(2), ElementsAre(1));
  EXPECT_EQ(Count("inbox"), 1);
  EXPECT_EQ(LastSequence(1), "");
  EXPECT_EQ(db_->Scalar("SELECT charge_id || ':' || (record_time IS NULL)::text FROM inbox_expired"), "ch_1:true");
}

// Past progress retention its charge's progress may be gone, and with it what recognises an event sent again
// as a new record (a replay from an archive): expired whatever its record's time.
TEST_F(PgInboxTest, AnEventOlderThanProgressRetentionIsExpiredWhateverItsRecordsTime) {
  auto inbox = Open();
  const auto now = std::chrono::system_clock::now();
  auto replayed = Event(1, 1, now - 24h * (kProgressRetentionDays + 1));
  replayed.record_time = now;
  const auto outcome = Apply(*inbox, {replayed});
  EXPECT_EQ(outcome.expired, 1);
  EXPECT_EQ(outcome.applied, 0);
  EXPECT_THAT(AppliedSequences(1), IsEmpty());
  EXPECT_EQ(Count("inbox_expired"), 1);
}

// The payload is kept up to 64 KiB, cut between two characters: half of one would make PostgreSQL refuse
// the whole batch, again and again, and the partition would stop.
TEST_F(PgInboxTest, AnExpiredEventsLongPayloadIsCutBetweenCharacters) {
  auto inbox = Open();
  auto old = Event(1, 1, std::chrono::system_clock::now() - 24h * (kRetentionDays + 1));
  old.payload = R"({"id":"ch_1","sequence":1,"notes":")";  // 35 bytes: the limit falls inside a 2-byte character
  for (int i = 0; i < 40'000; ++i) old.payload += "\xc3\xa9";
  old.payload += R"("})";
  EXPECT_EQ(Apply(*inbox, {old}).expired, 1);
  EXPECT_EQ(db_->Scalar("SELECT octet_length(payload) FROM inbox_expired"), std::to_string(kExpiredPayloadLimit - 1));
  EXPECT_EQ(db_->Scalar("SELECT right(payload, 1) FROM inbox_expired"), "\xc3\xa9");
}

TEST_F(PgInboxTest, RejectedMessagesAreKeptOnce) {
  auto inbox = Open();
  const std::vector<RejectedMessage> rejected{
      {.topic = "charge-events", .partition = 2, .offset = 41, .reason = "the value is not JSON", .key = "ch_1", .value = "{"},
      {.topic = "charge-events", .partition = 2, .offset = 42, .reason = "id is missing or not a UUID", .key = "", .value = "{}"}};
  const auto outcome = Apply(*inbox, {Event(1, 1)}, kWaitLong, rejected);
  EXPECT_EQ(outcome.rejected, 2);
  EXPECT_EQ(outcome.applied, 1);
  EXPECT_EQ(db_->Scalar("SELECT reason || '|' || message_key || '|' || value FROM inbox_rejected WHERE kafka_offset = 41"),
            "the value is not JSON|ch_1|{");
  // Read again (a re-delivery): kept once.
  EXPECT_EQ(Apply(*inbox, {}, kWaitLong, rejected).rejected, 0);
  EXPECT_EQ(Count("inbox_rejected"), 2);
}

TEST_F(PgInboxTest, RetentionMakesPartitionsAheadAndDropsOldDays) {
  auto inbox = Open();
  // Days 30, 15 and 14 back. With 14 days' retention day 15 holds only expired events (it ends 14 days
  // before today began); day 14 may still hold live ones.
  db_->Execute("SELECT inbox_ensure_partitions((now() AT TIME ZONE 'UTC')::date - 30, (now() AT TIME ZONE 'UTC')::date - 30)");
  db_->Execute("SELECT inbox_ensure_partitions((now() AT TIME ZONE 'UTC')::date - 15, (now() AT TIME ZONE 'UTC')::date - 14)");
  const auto old_part = db_->Scalar("SELECT 'inbox_' || to_char((now() AT TIME ZONE 'UTC')::date - 30, 'YYYYMMDD')");
  const auto day15_part = db_->Scalar("SELECT 'inbox_' || to_char((now() AT TIME ZONE 'UTC')::date - 15, 'YYYYMMDD')");
  const auto day14_part = db_->Scalar("SELECT 'inbox_' || to_char((now() AT TIME ZONE 'UTC')::date - 14, 'YYYYMMDD')");
  const auto kept_part = db_->Scalar("SELECT 'inbox_' || to_char((now() AT TIME ZONE 'UTC')::date - 1, 'YYYYMMDD')");
  const auto far_part = db_->Scalar("SELECT 'inbox_' || to_char((now() AT TIME ZONE 'UTC')::date + 10, 'YYYYMMDD')");
  ASSERT_EQ(db_->Scalar("SELECT to_regclass('" + old_part + "') IS NOT NULL"), "t");
  ASSERT_EQ(db_->Scalar("SELECT to_regclass('" + far_part + "') IS NULL"), "t");
  db_->Execute("INSERT INTO inbox (event_id, event_time, charge_id, sequence, event_type)"
               " VALUES (gen_random_uuid(), now() - interval '30 days', 'ch_old', 1, 't'),"
               "        (gen_random_uuid(), now() - interval '60 days', 'ch_older', 1, 't'),"
               "        (gen_random_uuid(), now(), 'ch_now', 1, 't')");
  db_->Execute("INSERT INTO inbox_charges (charge_id, last_sequence, updated_at) VALUES"
               " ('ch_stale', 3, now() - interval '200 days'), ('ch_fresh', 2, now() - interval '100 days')");

  const auto report = inbox->RunRetention({.retention_days = 14, .progress_retention_days = 180, .partitions_ahead = 10}).value();
  EXPECT_EQ(report.partitions_created, 3);  // the migration made 7 days ahead
  EXPECT_THAT(report.dropped, ElementsAre(old_part, day15_part));
  EXPECT_EQ(db_->Scalar("SELECT to_regclass('" + day14_part + "') IS NOT NULL"), "t");
  EXPECT_EQ(report.progress_forgotten, 1);
  EXPECT_EQ(db_->Scalar("SELECT to_regclass('" + old_part + "') IS NULL"), "t");
  EXPECT_EQ(db_->Scalar("SELECT to_regclass('" + kept_part + "') IS NOT NULL"), "t");
  EXPECT_EQ(db_->Scalar("SELECT to_regclass('" + far_part + "') IS NOT NULL"), "t");
  EXPECT_EQ(db_->Scalar("SELECT string_agg(charge_id, ',' ORDER BY charge_id) FROM inbox"), "ch_now");
  EXPECT_EQ(db_->Scalar("SELECT string_agg(charge_id, ',' ORDER BY charge_id) FROM inbox_charges"), "ch_fresh");

  const auto again = inbox->RunRetention({.retention_days = 14, .progress_retention_days = 180, .partitions_ahead = 10}).value();
  EXPECT_EQ(again.partitions_created, 0);
  EXPECT_THAT(again.dropped, IsEmpty());
}

// Two consumer instances (a rebalance, a zombie) applying the same charges at the same moment. Each round
// has charges of its own, delivered whole by both instances: in the same order (the batches collide
// head on) or each in an order of its own. The state after every round must be as if one instance had
// applied each event once, in order.
TEST_F(PgInboxTest, TwoInstancesApplyingTheSameChargesAtOnceApplyEachEventOnceInOrder) {
  constexpr int kRounds = 4;
  constexpr int kCharges = 200;
  constexpr int kEvents = 3;
  constexpr std::size_t kBatch = 40;
  std::atomic<int> retries{0};
  const auto deliver = [&](std::vector<ChargeEvent> events, unsigned seed) {
    auto inbox = Open();
    std::mt19937 rng(seed);
    std::shuffle(events.begin(), events.end(), rng);
    for (std::size_t i = 0; i < events.size(); i += kBatch) {
      const std::vector<ChargeEvent> batch(events.begin() + static_cast<std::ptrdiff_t>(i),
                                           events.begin() + static_cast<std::ptrdiff_t>(std::min(i + kBatch, events.size())));
      // As the consumer does: a failed transaction is tried again. Only a transient error may happen,
      // and the retry must then succeed.
      for (int attempt = 0;; ++attempt) {
        auto result = inbox->Apply(kTopic, batch, {}, handler_, kWaitLong, kExpiry);
        if (result) break;
        if (!retry::IsTransient(db::RetryabilityOf(result.error())) || attempt == 20) {
          ADD_FAILURE() << "batch failed: " << db::ToString(result.error().code) << ": " << result.error().detail;
          break;
        }
        ++retries;
      }
    }
  };
  for (int round = 0; round < kRounds; ++round) {
    const int first = (round + 1) * 1000;
    std::vector<ChargeEvent> events;
    for (int c = first; c < first + kCharges; ++c) {
      for (int s = 1; s <= kEvents; ++s) events.push_back(Event(c, s));
    }
    const auto seed = static_cast<unsigned>(round);
    const auto other_seed = round % 2 == 0 ? seed : seed + 100;  // even rounds: the same order
    std::thread a(deliver, events, seed);
    std::thread b(deliver, events, other_seed);
    a.join();
    b.join();

    const auto in_round = " WHERE charge_id >= 'ch_" + std::to_string(first) + "' AND charge_id < 'ch_" +
                          std::to_string(first + kCharges) + "'";
    SCOPED_TRACE("round " + std::to_string(round));
    EXPECT_EQ(db_->Scalar("SELECT count(*) FROM applied" + in_round), std::to_string(kCharges * kEvents))
        << "an event applied twice or not at all";
    EXPECT_EQ(db_->Scalar("SELECT count(DISTINCT event_id) FROM applied" + in_round), std::to_string(kCharges * kEvents));
    EXPECT_EQ(db_->Scalar("SELECT count(*) FROM inbox" + in_round), std::to_string(kCharges * kEvents));
    EXPECT_EQ(db_->Scalar("SELECT count(*) FROM inbox_held" + in_round), "0") << "an event left held";
    EXPECT_EQ(db_->Scalar("SELECT count(*) FROM inbox_gaps" + in_round), "0");
    EXPECT_EQ(db_->Scalar("SELECT count(*) FROM inbox_charges" + in_round + " AND last_sequence = 3"),
              std::to_string(kCharges))
        << "a charge's progress is not its last event";
    EXPECT_EQ(db_->Scalar("SELECT count(*) FROM (SELECT array_agg(sequence ORDER BY n) AS s FROM applied" + in_round +
                          " GROUP BY charge_id) x WHERE s <> ARRAY[1,2,3]"),
              "0")
        << "a charge's events applied out of order";
  }
  std::printf("two instances, %d rounds of %d events: %d transient failure(s) retried\n", kRounds,
              kCharges * kEvents, retries.load());
}

}  // namespace
}  // namespace charge_outbox::inbox
