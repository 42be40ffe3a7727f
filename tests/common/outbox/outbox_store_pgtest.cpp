// The outbox store against a real PostgreSQL with the real schema: what a claim may return (the first
// unpublished event of each charge, only from owned shards), parking and the parked commands, shard
// ownership shared by several sessions and taken over when one leaves, the insert notification, the
// backlog figures and retention.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <pqxx/pqxx>

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <thread>

#include <unistd.h>

#include "charge_outbox/outbox/outbox_store.hpp"
#include "pg_test_database.hpp"
#include "service_process.hpp"

namespace charge_outbox::outbox {
namespace {

using namespace std::chrono_literals;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using testing::PgTestDatabase;

class OutboxStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = PgTestDatabase::Create(::testing::UnitTest::GetInstance()->current_test_info()->name(),
                                 PgTestDatabase::Schema::kMigrated);
  }

  // An event as the charge store writes it; returns its id. `day_offset` moves created_at by whole days.
  std::string Insert(const std::string& charge, int sequence, int shard, int day_offset = 0, bool published = false) {
    return db_->Scalar(
        "INSERT INTO outbox (id, aggregateid, type, payload, sequence, shard, traceparent, created_at, published_at)"
        " VALUES (gen_random_uuid(), '" + charge + "', 'payments.charge.initiated.v1', '{\"sequence\": " +
        std::to_string(sequence) + "}', " + std::to_string(sequence) + ", " + std::to_string(shard) +
        ", NULL, now() + interval '" + std::to_string(day_offset) + " days', " + (published ? "now()" : "NULL") +
        ") RETURNING id");
  }

  std::unique_ptr<RelaySession> OpenSession() {
    auto s = MakePgRelaySession(db_->url(), "outbox-store-test");
    EXPECT_TRUE(s->Open().has_value());
    return s;
  }

  static std::vector<std::string> Ids(const std::vector<OutboxEvent>& events) {
    std::vector<std::string> out;
    for (const auto& e : events) out.push_back(e.id);
    std::sort(out.begin(), out.end());
    return out;
  }

  static std::vector<DeliveredRow> Rows(const std::vector<OutboxEvent>& events) {
    std::vector<DeliveredRow> out;
    for (const auto& e : events) out.push_back({.position = e.position, .created_at_us = e.created_at_us});
    return out;
  }

  std::int64_t PositionOf(const std::string& id) {
    return std::stoll(db_->Scalar("SELECT position FROM outbox WHERE id = '" + id + "'"));
  }

  // What the relay does under a steady flow for `duration`: claims `shards`, publishes what it finds, and
  // lets the floor take its steps (one every 100 ms at most). Returns the floor.
  static std::int64_t Relay(RelaySession& session, const std::vector<int>& shards, std::chrono::milliseconds duration,
                            std::int64_t until_floor_above = std::numeric_limits<std::int64_t>::max()) {
    const auto deadline = std::chrono::steady_clock::now() + duration;
    while (std::chrono::steady_clock::now() < deadline && session.ClaimFloor() <= until_floor_above) {
      const auto batch = session.Claim(shards, 1000, 1).value();
      if (batch.empty()) {
        EXPECT_TRUE(session.EndClaims().has_value());
      } else {
        EXPECT_EQ(session.MarkPublished(Rows(batch)).value(), std::ssize(batch));
      }
      std::this_thread::sleep_for(30ms);
    }
    return session.ClaimFloor();
  }
  static std::int64_t RelayUntilFloorAbove(RelaySession& session, const std::vector<int>& shards,
                                           std::int64_t position) {
    return Relay(session, shards, 10s, position);
  }

  // outbox_YYYYMMDD of the UTC day `offset` days from today.
  std::string Day(int offset) { return "outbox_" + DayDigits(offset); }
  std::string DayDigits(int offset) {
    return db_->Scalar("SELECT to_char((now() AT TIME ZONE 'UTC')::date + " + std::to_string(offset) +
                       ", 'YYYYMMDD')");
  }

  // `parent`'s partitions up to today and the default, then how many are ahead of today.
  std::string Partitions(const std::string& parent) {
    return db_->Scalar("SELECT string_agg(c.relname, ' ' ORDER BY c.relname) FILTER (WHERE c.relname <= 'outbox_' ||"
                       "   to_char((now() AT TIME ZONE 'UTC')::date, 'YYYYMMDD') OR c.relname = 'outbox_default')"
                       " || ' ... ' || count(*) FILTER (WHERE c.relname > 'outbox_' ||"
                       "   to_char((now() AT TIME ZONE 'UTC')::date, 'YYYYMMDD') AND c.relname <> 'outbox_default')"
                       " || ' ahead'"
                       " FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = '" +
                       parent + "'::regclass");
  }

  std::unique_ptr<PgTestDatabase> db_;
};

TEST_F(OutboxStoreTest, ClaimReturnsOnlyTheFirstUnpublishedEventOfEachCharge) {
  const auto a1 = Insert("ch_a", 1, 5);
  const auto a2 = Insert("ch_a", 2, 5);
  const auto b1 = Insert("ch_b", 1, 7);
  auto session = OpenSession();
  const auto assignment = session->Rebalance().value();
  ASSERT_EQ(assignment.owned.size(), 256u);
  EXPECT_EQ(assignment.members, 1);

  auto first = session->Claim(assignment.owned, 100, 1).value();
  std::vector<std::string> expected{a1, b1};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(Ids(first), expected);
  const auto& a_event = *std::find_if(first.begin(), first.end(), [&](const auto& e) { return e.id == a1; });
  EXPECT_EQ(a_event.aggregateid, "ch_a");
  EXPECT_EQ(a_event.sequence, 1);
  EXPECT_EQ(a_event.shard, 5);
  EXPECT_EQ(a_event.payload, R"({"sequence": 1})");
  EXPECT_THAT(a_event.time, ::testing::MatchesRegex("[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}[.][0-9]{3}Z"));

  // A claim marks nothing: claiming again returns the same events.
  EXPECT_EQ(Ids(session->Claim(assignment.owned, 100, 1).value()), expected);
  EXPECT_EQ(session->MarkPublished(Rows(first)).value(), 2);
  EXPECT_EQ(session->MarkPublished(Rows(first)).value(), 0);  // already published: nothing changes

  EXPECT_THAT(Ids(session->Claim(assignment.owned, 100, 1).value()), ElementsAre(a2));
  EXPECT_THAT(Ids(session->Claim({7}, 100, 1).value()), IsEmpty());  // only shard 5 has something left
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM outbox WHERE published_at IS NOT NULL"), "2");
}

TEST_F(OutboxStoreTest, AClaimReadsOnlyTheShardsItIsGivenEvenWithAHoleInTheirRange) {
  // Mid-rebalance a member can hold 5 and 7 but not yet 6: 6 is someone else's.
  const auto e5 = Insert("ch_5", 1, 5);
  Insert("ch_6", 1, 6);
  const auto e7 = Insert("ch_7", 1, 7);
  Insert("ch_8", 1, 8);
  auto session = OpenSession();
  std::vector<std::string> expected{e5, e7};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(Ids(session->Claim({7, 5}, 100, 1).value()), expected);
  EXPECT_EQ(Ids(session->Claim({5, 5, 7}, 100, 1).value()), expected);
  EXPECT_EQ(Ids(session->Claim({6, 7, 8}, 100, 1).value()).size(), 3u);  // a whole range
}

TEST_F(OutboxStoreTest, ClaimRespectsTheLimitAndPositionOrderWithinAShard) {
  std::vector<std::string> ids;
  for (int i = 0; i < 10; ++i) ids.push_back(Insert("ch_" + std::to_string(i), 1, 3));
  auto session = OpenSession();
  const auto owned = session->Rebalance().value().owned;
  const auto batch = session->Claim(owned, 4, 1).value();
  ASSERT_EQ(batch.size(), 4u);
  for (std::size_t i = 0; i < batch.size(); ++i) EXPECT_EQ(batch[i].id, ids[i]);
  for (std::size_t i = 1; i < batch.size(); ++i) EXPECT_LT(batch[i - 1].position, batch[i].position);
}

TEST_F(OutboxStoreTest, ClaimReturnsEachChargesNextEventsInWavesAndNothingPastAParkedOne) {
  const auto a1 = Insert("ch_a", 1, 6);
  const auto b1 = Insert("ch_b", 1, 6);
  const auto a2 = Insert("ch_a", 2, 6);
  const auto a3 = Insert("ch_a", 3, 6);
  const auto c1 = Insert("ch_c", 1, 6);
  const auto c2 = Insert("ch_c", 2, 6);
  auto session = OpenSession();
  const auto owned = session->Rebalance().value().owned;
  const auto c_first = session->Claim(owned, 100, 1).value();
  const auto c1_event = *std::find_if(c_first.begin(), c_first.end(), [&](const auto& e) { return e.id == c1; });
  ASSERT_TRUE(session->Park(c1_event, "INVALID_RECORD").has_value());

  const auto batch = session->Claim(owned, 100, 4).value();
  std::map<std::string, int> wave_of;
  for (const auto& e : batch) wave_of[e.id] = e.wave;
  // ch_c's parked event holds it back entirely: c2 is not in any wave.
  EXPECT_EQ(wave_of, (std::map<std::string, int>{{a1, 0}, {b1, 0}, {a2, 1}, {a3, 2}}));
  EXPECT_FALSE(wave_of.contains(c2));
  for (std::size_t i = 1; i < batch.size(); ++i) EXPECT_LT(batch[i - 1].position, batch[i].position);

  // At most `waves` events of one charge, and a cut by the limit keeps a prefix of each charge.
  std::map<std::string, int> two_waves;
  for (const auto& e : session->Claim(owned, 100, 2).value()) two_waves[e.id] = e.wave;
  EXPECT_EQ(two_waves, (std::map<std::string, int>{{a1, 0}, {b1, 0}, {a2, 1}}));
  std::vector<std::string> cut;
  for (const auto& e : session->Claim(owned, 3, 4).value()) cut.push_back(e.id);
  EXPECT_THAT(cut, ElementsAre(a1, b1, a2));
}

TEST_F(OutboxStoreTest, AClaimLeavesOutWhatTheSessionDeliveredAndHasNotMarkedYet) {
  const auto a1 = Insert("ch_a", 1, 4);
  const auto a2 = Insert("ch_a", 2, 4);
  const auto b1 = Insert("ch_b", 1, 4);
  auto session = OpenSession();
  const auto owned = session->Rebalance().value().owned;
  const auto first = session->Claim(owned, 100, 1).value();
  ASSERT_THAT(Ids(first), ::testing::UnorderedElementsAre(a1, b1));
  const auto& a1_event = *std::find_if(first.begin(), first.end(), [&](const auto& e) { return e.id == a1; });

  // a1 delivered, not marked: ch_a's next event is its wave 0 now, and the limit counts past a1.
  const auto next = session->Claim(owned, 2, 1, {a1_event.position}).value();
  std::map<std::string, int> wave_of;
  for (const auto& e : next) wave_of[e.id] = e.wave;
  EXPECT_EQ(wave_of, (std::map<std::string, int>{{a2, 0}, {b1, 0}}));
  // Still unpublished in the database until marked; then gone for good.
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM outbox WHERE published_at IS NULL"), "3");
  EXPECT_EQ(session->MarkPublished(Rows({a1_event})).value(), 1);
  EXPECT_THAT(Ids(session->Claim(owned, 100, 1).value()), ::testing::UnorderedElementsAre(a2, b1));
}

// Claims share one transaction until the mark or EndClaims: the outbox's locks are taken once for several
// claims. Each claim still sees what committed before it, whatever the database's default isolation, and
// once the transaction ends the session holds nothing a DDL statement or vacuum would wait behind. A claim
// that fills its window (a backlog) commits at once.
TEST_F(OutboxStoreTest, ClaimsShareATransactionThatSeesEachCommitAndEndsWithTheMarkOrEndClaims) {
  db_->ExecuteAsAdmin("ALTER DATABASE " + db_->name() + " SET default_transaction_isolation = 'repeatable read'");
  auto session = OpenSession();
  const auto owned = session->Rebalance().value().owned;
  // The session's row of pg_stat_activity (other tests' sessions have the same name, in their databases).
  const std::string session_row = "a.application_name = 'outbox-store-test' AND a.datname = current_database()";
  const auto state = [&] { return db_->Scalar("SELECT state FROM pg_stat_activity a WHERE " + session_row); };
  const auto outbox_locks = [&] {
    return db_->Scalar("SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)"
                       " WHERE " + session_row + " AND l.relation = 'outbox'::regclass");
  };
  // Held back while the claims' transaction is open, granted once it ends.
  const auto ddl_waits = [&] {
    try {
      pqxx::connection conn(db_->url());
      pqxx::work tx(conn);
      tx.exec("SET LOCAL lock_timeout = '200ms'");
      tx.exec("LOCK TABLE outbox IN ACCESS EXCLUSIVE MODE");
      return false;
    } catch (const pqxx::sql_error& e) {
      if (e.sqlstate() != "55P03") throw;
      return true;
    }
  };

  const auto a1 = Insert("ch_a", 1, 4);
  const auto first = session->Claim(owned, 100, 1).value();
  ASSERT_THAT(Ids(first), ElementsAre(a1));
  EXPECT_EQ(state(), "idle in transaction");
  EXPECT_EQ(outbox_locks(), "1");
  const auto b1 = Insert("ch_b", 1, 4);  // committed after the transaction began
  EXPECT_THAT(Ids(session->Claim(owned, 100, 1, {first[0].position}).value()), ElementsAre(b1));
  EXPECT_TRUE(ddl_waits());

  EXPECT_EQ(session->MarkPublished(Rows(first)).value(), 1);  // ends it
  EXPECT_EQ(state(), "idle");
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM pg_stat_activity a WHERE " + session_row +
                        " AND (backend_xmin IS NOT NULL OR backend_xid IS NOT NULL)"),
            "0");
  EXPECT_EQ(outbox_locks(), "0");
  EXPECT_FALSE(ddl_waits());
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM outbox WHERE published_at IS NOT NULL"), "1");

  ASSERT_THAT(Ids(session->Claim(owned, 100, 1).value()), ElementsAre(b1));
  EXPECT_EQ(state(), "idle in transaction");
  ASSERT_TRUE(session->EndClaims().has_value());
  EXPECT_EQ(state(), "idle");
  EXPECT_FALSE(ddl_waits());
  ASSERT_TRUE(session->EndClaims().has_value());  // nothing open: nothing to do

  // A full window is a backlog: its claim commits at once, its snapshot gone with it.
  Insert("ch_c", 1, 4);
  ASSERT_EQ(session->Claim(owned, 1, 1).value().size(), 1U);
  EXPECT_EQ(state(), "idle");
}

TEST_F(OutboxStoreTest, ClaimKeepsAChargesOrderAcrossDayPartitions) {
  // Event 1 sits in yesterday's partition, event 2 in today's: the claim reads both partitions of the
  // shard in position order, so it still sees event 1 first and holds event 2 back.
  const auto a1 = Insert("ch_a", 1, 9, -1);
  const auto a2 = Insert("ch_a", 2, 9);
  ASSERT_NE(db_->Scalar("SELECT tableoid::regclass::text FROM outbox WHERE id = '" + a1 + "'"),
            db_->Scalar("SELECT tableoid::regclass::text FROM outbox WHERE id = '" + a2 + "'"));
  auto session = OpenSession();
  const auto owned = session->Rebalance().value().owned;
  const auto first = session->Claim(owned, 100, 1).value();
  EXPECT_THAT(Ids(first), ElementsAre(a1));
  EXPECT_EQ(session->MarkPublished(Rows(first)).value(), 1);
  EXPECT_THAT(Ids(session->Claim(owned, 100, 1).value()), ElementsAre(a2));
}

TEST_F(OutboxStoreTest, UnderABacklogLargerThanABatchTheOldestEventsGoFirstWhateverTheirShard) {
  // 20 events on shard 3, then 20 spread over shards 1 and 2, then 20 more on shard 3: a batch is the 16
  // oldest, whichever shards they are on, so no shard waits behind another's backlog.
  std::vector<std::string> written;
  for (int i = 0; i < 20; ++i) written.push_back(Insert("ch_" + std::to_string(300 + i), 1, 3));
  for (int i = 0; i < 20; ++i) written.push_back(Insert("ch_" + std::to_string(100 + i), 1, 1 + i % 2));
  for (int i = 0; i < 20; ++i) written.push_back(Insert("ch_" + std::to_string(320 + i), 1, 3));
  auto session = OpenSession();
  const auto owned = session->Rebalance().value().owned;
  for (std::ptrdiff_t from = 0; from < std::ssize(written); from += 16) {
    const auto batch = session->Claim(owned, 16, 1).value();
    std::vector<std::string> claimed;
    for (const auto& e : batch) claimed.push_back(e.id);
    const auto to = std::min(std::ssize(written), from + 16);
    EXPECT_EQ(claimed, std::vector<std::string>(written.begin() + from, written.begin() + to)) << "from " << from;
    EXPECT_EQ(session->MarkPublished(Rows(batch)).value(), static_cast<std::int64_t>(batch.size()));
  }
  EXPECT_THAT(session->Claim(owned, 16, 1).value(), IsEmpty());
}

TEST_F(OutboxStoreTest, ParkedEventsNeverFillTheWindowHoweverManyThereAre) {
  // 12 charges with a parked first event and a waiting second one, all older than the one healthy
  // charge: a window of 10 still reaches it.
  auto session = OpenSession();
  const auto owned = session->Rebalance().value().owned;
  for (int i = 0; i < 12; ++i) {
    const auto charge = "ch_p" + std::to_string(i);
    Insert(charge, 1, 2);
    Insert(charge, 2, 2);
  }
  const auto first_events = session->Claim(owned, 100, 1).value();
  ASSERT_EQ(first_events.size(), 12u);
  for (const auto& e : first_events) ASSERT_TRUE(session->Park(e, "MSG_SIZE_TOO_LARGE").has_value());
  const auto healthy = Insert("ch_ok", 1, 2);
  EXPECT_THAT(Ids(session->Claim(owned, 10, 4).value()), ElementsAre(healthy));
}

TEST_F(OutboxStoreTest, AnUnpublishedEventIdIsUnique) {
  const auto id = Insert("ch_a", 1, 4);
  const auto duplicate = "INSERT INTO outbox (id, aggregateid, type, payload, sequence, shard, created_at)"
                         " SELECT id, aggregateid, type, payload, 2, shard, created_at FROM outbox WHERE id = '" +
                         id + "'";
  EXPECT_THROW(db_->Execute(duplicate), std::exception);
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM outbox"), "1");
}

TEST_F(OutboxStoreTest, AParkedEventHoldsBackItsChargeUntilRetriedOrSkipped) {
  const auto a1 = Insert("ch_a", 1, 1);
  const auto a2 = Insert("ch_a", 2, 1);
  const auto b1 = Insert("ch_b", 1, 2);
  auto session = OpenSession();
  auto admin = MakePgOutboxAdmin(db_->url(), "outbox-store-test");
  const auto owned = session->Rebalance().value().owned;

  auto batch = session->Claim(owned, 100, 1).value();
  const auto a_event = *std::find_if(batch.begin(), batch.end(), [&](const auto& e) { return e.id == a1; });
  ASSERT_TRUE(session->Park(a_event, "MSG_SIZE_TOO_LARGE: Broker: Message size too large").has_value());

  // Other charges flow; the parked event's later event waits.
  EXPECT_THAT(Ids(session->Claim(owned, 100, 1).value()), ElementsAre(b1));
  const auto parked = admin->ListParked(10).value();
  ASSERT_EQ(parked.size(), 1u);
  EXPECT_EQ(parked[0].id, a1);
  EXPECT_EQ(parked[0].aggregateid, "ch_a");
  EXPECT_EQ(parked[0].sequence, 1);
  EXPECT_EQ(parked[0].error, "MSG_SIZE_TOO_LARGE: Broker: Message size too large");
  const auto stats = admin->Backlog().value();
  EXPECT_EQ(stats.unpublished, 3);
  EXPECT_EQ(stats.parked, 1);

  const OperatorNote dana{"dana", "raised the limit"};
  EXPECT_EQ(admin->RetryParked(a1, dana).value(), ParkedChange::kDone);
  EXPECT_EQ(admin->RetryParked(a1, dana).value(), ParkedChange::kNotParked);
  // Only the change that happened is on record, with the park error it undid.
  EXPECT_EQ(db_->Scalar("SELECT operator || '|' || action || '|' || before || '|' || after FROM operator_actions"),
            "dana|parked.retry|parked: MSG_SIZE_TOO_LARGE: Broker: Message size too large|retried");
  batch = session->Claim(owned, 100, 1).value();
  std::vector<std::string> expected{a1, b1};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(Ids(batch), expected);

  ASSERT_TRUE(session->Park(a_event, "INVALID_RECORD").has_value());
  EXPECT_EQ(admin->SkipParked(a1, dana).value(), ParkedChange::kDone);
  EXPECT_EQ(admin->SkipParked(a1, dana).value(), ParkedChange::kNotParked);
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM operator_actions WHERE action = 'parked.skip'"), "1");
  EXPECT_EQ(db_->Scalar("SELECT skipped_at IS NOT NULL AND published_at IS NOT NULL FROM outbox WHERE id = '" + a1 + "'"),
            "t");
  expected = {a2, b1};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(Ids(session->Claim(owned, 100, 1).value()), expected);
  EXPECT_THAT(admin->ListParked(10).value(), IsEmpty());
}

TEST_F(OutboxStoreTest, AShardsNextOwnerHoldsBackTheChargesItsPreviousOwnerParked) {
  const auto a1 = Insert("ch_a", 1, 1);
  const auto a2 = Insert("ch_a", 2, 1);
  const auto b1 = Insert("ch_b", 1, 2);
  {
    auto first_owner = OpenSession();
    const auto owned = first_owner->Rebalance().value().owned;
    const auto batch = first_owner->Claim(owned, 100, 1).value();
    const auto a_event = *std::find_if(batch.begin(), batch.end(), [&](const auto& e) { return e.id == a1; });
    ASSERT_TRUE(first_owner->Park(a_event, "INVALID_RECORD").has_value());
  }
  // The next owner parked nothing itself: it learns of ch_a's parked event when it takes the shard.
  auto next_owner = OpenSession();
  auto owned = next_owner->Rebalance().value().owned;
  EXPECT_THAT(Ids(next_owner->Claim(owned, 100, 4).value()), ElementsAre(b1));

  // Retried, the event goes first, then the charge's next one; a rebalance that finds nothing parked
  // any more claims without looking for parked events.
  auto admin = MakePgOutboxAdmin(db_->url(), "outbox-store-test");
  EXPECT_EQ(admin->RetryParked(a1, {"dana", "retry"}).value(), ParkedChange::kDone);
  owned = next_owner->Rebalance().value().owned;
  const auto batch = next_owner->Claim(owned, 100, 4).value();
  std::vector<std::pair<std::string, int>> waves;
  for (const auto& e : batch) waves.emplace_back(e.id, e.wave);
  EXPECT_THAT(waves, ::testing::UnorderedElementsAre(std::pair{a1, 0}, std::pair{a2, 1}, std::pair{b1, 0}));
}

TEST_F(OutboxStoreTest, MembersShareTheShardsAndTakeOverWhenOneLeaves) {
  std::vector<std::unique_ptr<RelaySession>> sessions;
  for (int i = 0; i < 3; ++i) sessions.push_back(OpenSession());
  std::vector<ShardAssignment> last(3);
  auto settled = [&](std::size_t live, std::size_t expected_each_min) {
    return testing::Eventually(
        [&] {
          std::set<int> all;
          std::size_t total = 0;
          bool fair = true;
          for (std::size_t i = 0; i < live; ++i) {
            last[i] = sessions[i]->Rebalance().value();
            total += last[i].owned.size();
            all.insert(last[i].owned.begin(), last[i].owned.end());
            fair = fair && last[i].owned.size() >= expected_each_min && last[i].members == static_cast<int>(live);
          }
          return fair && total == 256 && all.size() == 256;  // disjoint and complete
        },
        10s);
  };
  ASSERT_TRUE(settled(3, 85));
  for (const auto& a : last) EXPECT_LE(a.owned.size(), 86u);

  // Events of a shard are claimed by its owner only.
  const int shard = last[1].owned.front();
  const auto id = Insert("ch_x", 1, shard);
  EXPECT_THAT(Ids(sessions[1]->Claim(last[1].owned, 10, 1).value()), ElementsAre(id));
  EXPECT_THAT(Ids(sessions[0]->Claim(last[0].owned, 10, 1).value()), IsEmpty());

  // A member that dies (its session closes) leaves at once: its locks go with it.
  sessions[2]->Close();
  ASSERT_TRUE(settled(2, 128));
}

TEST_F(OutboxStoreTest, AnInsertWakesAnArmedSessionAndSilenceTimesOut) {
  auto session = OpenSession();
  const auto owned = session->Rebalance().value().owned;
  EXPECT_TRUE(session->WaitForInsert(0ms).value());  // the first wait after Open always claims once
  EXPECT_EQ(session->ArmWakeups(owned).value().newly_armed, 256);
  EXPECT_EQ(session->ArmWakeups(owned).value().newly_armed, 0);  // already armed
  const auto quiet_start = std::chrono::steady_clock::now();
  EXPECT_FALSE(session->WaitForInsert(200ms).value());
  EXPECT_GE(std::chrono::steady_clock::now() - quiet_start, 190ms);

  std::thread writer([&] {
    std::this_thread::sleep_for(100ms);  // the writer must come after the wait began: that is the case tested
    Insert("ch_n", 1, 9);
  });
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(session->WaitForInsert(10s).value());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  writer.join();
}

TEST_F(OutboxStoreTest, WritersDoNotNotifyABusySessionAndArmingWaitsForThemToCommit) {
  auto session = OpenSession();
  const auto owned = session->Rebalance().value().owned;
  session->WaitForInsert(0ms).value();
  // Busy (not armed): an insert sends no notification.
  Insert("ch_busy", 1, 4);
  EXPECT_FALSE(session->WaitForInsert(300ms).value());

  // A writer of shard 6 still in its transaction holds the shard's wait lock shared: that shard cannot be
  // armed until it commits, and once it has, its row is visible to the claim the caller makes next.
  pqxx::connection conn(db_->url());
  pqxx::work slow(conn);
  slow.exec("INSERT INTO outbox (id, aggregateid, type, payload, sequence, shard)"
            " VALUES (gen_random_uuid(), 'ch_slow', 't', '{}', 1, 6)");
  const auto arming = session->ArmWakeups(owned).value();
  EXPECT_EQ(arming.newly_armed, 255);
  EXPECT_EQ(arming.pending, 1);
  EXPECT_FALSE(session->WaitForInsert(200ms).value());  // the slow writer saw a busy relay: no NOTIFY
  slow.commit();
  const auto again = session->ArmWakeups(owned).value();
  EXPECT_EQ(again.newly_armed, 1);
  EXPECT_EQ(again.pending, 0);
  EXPECT_EQ(session->Claim(owned, 10, 1).value().size(), 2u);  // ch_busy and ch_slow

  // Armed: the next writer notifies; disarmed again: silence.
  Insert("ch_armed", 1, 4);
  EXPECT_TRUE(session->WaitForInsert(5s).value());
  ASSERT_TRUE(session->DisarmWakeups().has_value());
  Insert("ch_after", 1, 4);
  EXPECT_FALSE(session->WaitForInsert(300ms).value());
}

// The claims' floor (docs/outbox-relay.md, "The claim's floor"): the claims scan from a position below which
// every event of the session's shards is published, so that what a long snapshot keeps in the index
// costs them nothing, and the floor never passes an event that can still be committed or claimed.

TEST_F(OutboxStoreTest, TheFloorPassesPublishedEventsWhileALongReadOnlySnapshotIsOpen) {
  auto session = OpenSession();
  const auto owned = session->Rebalance().value().owned;
  // A report, a pg_dump: its snapshot keeps every published event's index entry until it ends.
  pqxx::connection report_conn(db_->url());
  pqxx::transaction<pqxx::repeatable_read, pqxx::read_only> report(report_conn);
  report.exec("SELECT count(*) FROM outbox");

  std::string last;
  for (int i = 0; i < 300; ++i) last = Insert("ch_" + std::to_string(i), 1, i % 256);
  const auto floor = RelayUntilFloorAbove(*session, owned, PositionOf(last));
  EXPECT_GT(floor, PositionOf(last));
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM outbox WHERE published_at IS NULL"), "0");
  EXPECT_EQ(report.exec("SELECT count(*) FROM outbox WHERE published_at IS NULL")[0][0].as<int>(), 0);

  // The floor is no limit on what comes next.
  const auto next = Insert("ch_next", 1, 7);
  EXPECT_THAT(Ids(session->Claim(owned, 100, 1).value()), ElementsAre(next));
}

TEST_F(OutboxStoreTest, TheFloorWaitsForAWriterThatDrewAPositionAndHasNotCommitted) {
  auto session = OpenSession();
  const auto owned = session->Rebalance().value().owned;
  pqxx::connection writer_conn(db_->url());
  pqxx::work late_writer(writer_conn);
  const auto late_position =
      late_writer
          .exec("INSERT INTO outbox (id, aggregateid, type, payload, sequence, shard)"
                " VALUES (gen_random_uuid(), 'ch_late', 't', '{}', 1, 4) RETURNING position")[0][0]
          .as<std::int64_t>();
  const auto later = Insert("ch_later", 1, 4);  // a higher position, committed first
  ASSERT_GT(PositionOf(later), late_position);

  EXPECT_LE(Relay(*session, owned, 1500ms), late_position);
  EXPECT_EQ(db_->Scalar("SELECT published_at IS NOT NULL FROM outbox WHERE id = '" + later + "'"), "t");

  late_writer.commit();
  const auto batch = session->Claim(owned, 100, 1).value();
  ASSERT_EQ(batch.size(), 1u);
  EXPECT_EQ(batch[0].aggregateid, "ch_late");
  ASSERT_EQ(session->MarkPublished(Rows(batch)).value(), 1);
  EXPECT_GT(RelayUntilFloorAbove(*session, owned, PositionOf(later)), PositionOf(later));
}

TEST_F(OutboxStoreTest, TheFloorWaitsForAWriterStillWritingTheRowWhosePositionItDrew) {
  // PostgreSQL gives a transaction its id at its first row write, after the row's defaults (its position)
  // are computed; a BEFORE trigger makes that moment long. Migration 0011's default takes the id first.
  db_->Execute(
      "CREATE FUNCTION slow_outbox_insert() RETURNS trigger LANGUAGE plpgsql AS"
      " $$BEGIN PERFORM pg_sleep(3); RETURN NEW; END$$;"
      " CREATE TRIGGER slow_outbox_insert BEFORE INSERT ON outbox FOR EACH ROW"
      " WHEN (NEW.aggregateid = 'ch_slow') EXECUTE FUNCTION slow_outbox_insert()");
  auto session = OpenSession();
  const auto owned = session->Rebalance().value().owned;
  Insert("ch_before", 1, 4);  // the sequence's first value of the run is logged, which takes an id anyway
  std::thread slow_writer([url = db_->url()] {
    pqxx::connection conn(url);
    pqxx::nontransaction tx(conn);
    tx.exec("INSERT INTO outbox (id, aggregateid, type, payload, sequence, shard)"
            " VALUES (gen_random_uuid(), 'ch_slow', 't', '{}', 1, 4)");
  });
  // Inside its insert, past the default: the position is drawn.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  bool drawn = false;
  while (!drawn && std::chrono::steady_clock::now() < deadline) {
    drawn = db_->Scalar("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                        " AND wait_event = 'PgSleep' AND query LIKE '%ch_slow%'") == "1";
    if (!drawn) std::this_thread::sleep_for(20ms);
  }
  if (!drawn) {
    slow_writer.join();
    FAIL() << "the slow writer never reached its trigger";
  }
  const auto fast = Insert("ch_fast", 1, 4);
  const auto floor_meanwhile = Relay(*session, owned, 1s);  // well inside the writer's 3 s
  slow_writer.join();
  const auto slow = db_->Scalar("SELECT id FROM outbox WHERE aggregateid = 'ch_slow'");
  ASSERT_LT(PositionOf(slow), PositionOf(fast));
  EXPECT_LE(floor_meanwhile, PositionOf(slow));
  EXPECT_THAT(Ids(session->Claim(owned, 100, 1).value()), ElementsAre(slow));
}

TEST_F(OutboxStoreTest, TheFloorStopsAtAParkedEventSoThatARetriedOneIsClaimedAgain) {
  const auto a1 = Insert("ch_a", 1, 4);
  Insert("ch_b", 1, 5);
  auto session = OpenSession();
  auto admin = MakePgOutboxAdmin(db_->url(), "outbox-store-test");
  const auto owned = session->Rebalance().value().owned;
  const auto batch = session->Claim(owned, 100, 1).value();
  const auto a_event = *std::find_if(batch.begin(), batch.end(), [&](const auto& e) { return e.id == a1; });
  ASSERT_TRUE(session->Park(a_event, "INVALID_RECORD").has_value());
  const auto c1 = Insert("ch_c", 1, 6);

  EXPECT_LE(Relay(*session, owned, 1s), PositionOf(a1));
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM outbox WHERE published_at IS NULL"), "1");

  EXPECT_EQ(admin->RetryParked(a1, {"dana", "retry"}).value(), ParkedChange::kDone);
  EXPECT_THAT(Ids(session->Claim(owned, 100, 1).value()), ElementsAre(a1));
  EXPECT_GT(PositionOf(c1), PositionOf(a1));
}

TEST_F(OutboxStoreTest, AClaimOfShardsTheFloorWasNotFoundForScansFromTheStart) {
  auto session = OpenSession();
  const auto other_shard = Insert("ch_other", 1, 7);  // not among the shards first claimed
  std::string last;
  for (int i = 0; i < 5; ++i) last = Insert("ch_" + std::to_string(i), 1, 4);
  const std::vector<int> first_shards{3, 4, 5};
  EXPECT_GT(RelayUntilFloorAbove(*session, first_shards, PositionOf(last)), PositionOf(other_shard));

  // Fewer shards: the floor holds for them.
  const auto next = Insert("ch_next", 1, 4);
  EXPECT_THAT(Ids(session->Claim({4}, 100, 1).value()), ElementsAre(next));
  EXPECT_GT(session->ClaimFloor(), PositionOf(other_shard));
  ASSERT_TRUE(session->EndClaims().has_value());
  // A shard gained (a rebalance): from the start again.
  std::vector<std::string> expected{next, other_shard};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(Ids(session->Claim({4, 7}, 100, 1).value()), expected);
  EXPECT_EQ(session->ClaimFloor(), 0);
}

TEST_F(OutboxStoreTest, WithoutTheProofsPreconditionsTheClaimsHaveNoFloor) {
  auto session = OpenSession();
  const auto owned = session->Rebalance().value().owned;
  const auto first = Insert("ch_a", 1, 4);
  ASSERT_GT(RelayUntilFloorAbove(*session, owned, PositionOf(first)), PositionOf(first));

  // Cached values: a backend may hand out a position below the sequence's last_value later.
  db_->Execute("ALTER SEQUENCE outbox_position_seq CACHE 20");
  Insert("ch_b", 1, 4);
  EXPECT_EQ(Relay(*session, owned, 500ms), 0);
  db_->Execute("ALTER SEQUENCE outbox_position_seq CACHE 1");
  const auto last = Insert("ch_c", 1, 4);
  EXPECT_GT(RelayUntilFloorAbove(*session, owned, PositionOf(last)), PositionOf(last));

  // The position drawn before the writer has a transaction id (the default before migration 0011).
  db_->Execute("ALTER TABLE outbox ALTER COLUMN position SET DEFAULT nextval('outbox_position_seq')");
  Insert("ch_d", 1, 4);
  EXPECT_EQ(Relay(*session, owned, 500ms), 0);
}

TEST_F(OutboxStoreTest, ASessionWhoseFloorStepIsRefusedClaimsWithoutAFloor) {
  // A relay's role with the outbox's privileges and not the sequence's: the step cannot read the sequence.
  // Roles belong to the cluster, so the name is this process's.
  const auto role = "relay_without_sequence_" + std::to_string(::getpid());
  db_->Execute("DROP ROLE IF EXISTS " + role + "; CREATE ROLE " + role + " LOGIN; GRANT SELECT, UPDATE ON outbox TO " +
               role);
  auto session = MakePgRelaySession(
      db_->url() + (db_->url().find('?') == std::string::npos ? "?" : "&") + "user=" + role, "outbox-store-test");
  ASSERT_TRUE(session->Open().has_value());
  const auto owned = session->Rebalance().value().owned;
  Insert("ch_a", 1, 4);
  EXPECT_EQ(Relay(*session, owned, 500ms), 0);
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM outbox WHERE published_at IS NULL"), "0");
  const auto next = Insert("ch_b", 1, 4);
  EXPECT_THAT(Ids(session->Claim(owned, 100, 1).value()), ElementsAre(next));
}

TEST_F(OutboxStoreTest, BacklogReportsTheAgeOfTheOldestUnpublishedEvent) {
  auto admin = MakePgOutboxAdmin(db_->url(), "outbox-store-test");
  EXPECT_EQ(admin->Backlog().value().unpublished, 0);
  EXPECT_EQ(admin->Backlog().value().oldest_age_seconds, 0.0);
  db_->Execute(
      "INSERT INTO outbox (id, aggregateid, type, payload, sequence, shard, created_at) VALUES"
      " (gen_random_uuid(), 'ch_old', 't', '{}', 1, 1, now() - interval '90 seconds'),"
      " (gen_random_uuid(), 'ch_new', 't', '{}', 1, 2, now())");
  Insert("ch_done", 1, 3, 0, true);
  const auto stats = admin->Backlog().value();
  EXPECT_EQ(stats.unpublished, 2);
  EXPECT_GE(stats.oldest_age_seconds, 90.0);
  EXPECT_LT(stats.oldest_age_seconds, 120.0);
}

TEST_F(OutboxStoreTest, RetentionDropsOldPublishedPartitionsAndKeepsOnesWithUnpublishedEvents) {
  db_->Execute("SELECT outbox_ensure_partitions((now() AT TIME ZONE 'UTC')::date - 20, (now() AT TIME ZONE 'UTC')::date - 19)");
  const auto old_published = Day(-20);
  const auto old_unpublished = Day(-19);
  ASSERT_EQ(db_->Scalar("SELECT to_regclass('" + old_published + "') IS NOT NULL"), "t");
  Insert("ch_p", 1, 1, -20, true);
  Insert("ch_p", 2, 1, -20, true);
  Insert("ch_u", 1, 1, -19, false);
  // A day with no partition of its own lands in outbox_default: its published rows go, unpublished stay.
  Insert("ch_d", 1, 1, -30, true);
  Insert("ch_e", 1, 1, -30, false);
  ASSERT_EQ(db_->Scalar("SELECT count(*) FROM outbox_default"), "2");

  auto admin = MakePgOutboxAdmin(db_->url(), "outbox-store-test");
  const auto report = admin->RunRetention({.retention_days = 7, .days_ahead = 9}).value();
  EXPECT_FALSE(report.skipped);
  EXPECT_THAT(report.dropped, ElementsAre(old_published));
  EXPECT_THAT(report.kept_unpublished, ElementsAre(old_unpublished));
  EXPECT_THAT(report.moved_to_history, IsEmpty());
  EXPECT_THAT(report.failed, IsEmpty());
  EXPECT_EQ(report.default_rows_deleted, 1);
  EXPECT_EQ(report.partitions_created, 2);  // migration 0001 made up to today + 7; today + 8 and + 9 are new
  EXPECT_EQ(db_->Scalar("SELECT to_regclass('" + old_published + "') IS NULL"), "t");
  EXPECT_EQ(db_->Scalar("SELECT to_regclass('" + old_unpublished + "') IS NOT NULL"), "t");
  EXPECT_EQ(db_->Scalar("SELECT to_regclass('" + Day(9) + "') IS NOT NULL"), "t");
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM outbox"), "2");  // ch_u and ch_e
  // Every partition, those of the migrations and those made since, is vacuumed every 10,000 dead rows.
  EXPECT_EQ(db_->Scalar("SELECT count(*) FILTER (WHERE NOT COALESCE(c.reloptions, '{}') @>"
                        "  '{autovacuum_vacuum_scale_factor=0,autovacuum_vacuum_threshold=10000}')"
                        " || ' of ' || count(*)"
                        " FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
                        " WHERE i.inhparent = 'outbox'::regclass"),
            "0 of " + db_->Scalar("SELECT count(*) FROM pg_inherits WHERE inhparent = 'outbox'::regclass"));

  // Once published, the kept partition goes on the next run; recent partitions are never touched.
  db_->Execute("UPDATE outbox SET published_at = now()");
  const auto again = admin->RunRetention({.retention_days = 7, .days_ahead = 9}).value();
  EXPECT_THAT(again.dropped, ElementsAre(old_unpublished));
  EXPECT_THAT(again.kept_unpublished, IsEmpty());
  EXPECT_EQ(again.partitions_created, 0);
  EXPECT_EQ(db_->Scalar("SELECT to_regclass('" + Day(0) + "') IS NOT NULL"), "t");
}

// What the relay's claims pay for is every partition of `outbox`: retention leaves there only yesterday,
// today, the days ahead, and older days that still hold an unpublished event.
TEST_F(OutboxStoreTest, RetentionMovesPublishedDaysOlderThanYesterdayToHistoryAndDropsThemThere) {
  db_->Execute("SELECT outbox_ensure_partitions((now() AT TIME ZONE 'UTC')::date - 12, (now() AT TIME ZONE 'UTC')::date)");
  const auto published_day = Insert("ch_old", 1, 3, -3, true);
  Insert("ch_old", 2, 3, -3, true);
  const auto waiting_day = Insert("ch_late", 1, 4, -4, false);  // the relay was down: not retention's business
  Insert("ch_y", 1, 5, -1, true);                              // yesterday stays: it may still be written to
  // A day moved to history by an earlier run, now past retention.
  db_->Execute("ALTER TABLE outbox DETACH PARTITION " + Day(-12) + "; ALTER TABLE " + Day(-12) +
               " INHERIT outbox_history");

  auto admin = MakePgOutboxAdmin(db_->url(), "outbox-store-test");
  const auto report = admin->RunRetention({.retention_days = 7, .days_ahead = 7}).value();
  EXPECT_THAT(report.failed, IsEmpty());
  EXPECT_THAT(report.kept_unpublished, IsEmpty());
  // Past retention (older than 7 days): dropped, from history or straight from the outbox. Younger, older
  // than yesterday and published (or empty): moved. The day with an unpublished event stays.
  std::vector<std::string> dropped{Day(-12)};
  std::vector<std::string> moved;
  for (int offset = -11; offset <= -2; ++offset) {
    if (offset < -7) dropped.push_back(Day(offset));
    if (offset >= -7 && offset != -4) moved.push_back(Day(offset));
  }
  EXPECT_EQ(report.dropped, dropped);
  EXPECT_EQ(report.moved_to_history, moved);
  EXPECT_EQ(Partitions("outbox"), "outbox_" + DayDigits(-4) + " outbox_" + DayDigits(-1) + " outbox_" +
                                      DayDigits(0) + " outbox_default ... 7 ahead");
  // History reads like the outbox; the relay's table no longer holds those rows.
  EXPECT_EQ(db_->Scalar("SELECT string_agg(sequence::text, ',' ORDER BY sequence) FROM outbox_history"
                        " WHERE aggregateid = 'ch_old'"),
            "1,2");
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM outbox WHERE aggregateid = 'ch_old'"), "0");
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM outbox_history WHERE id = '" + published_day + "'"), "1");

  // The relay still claims the old unpublished event, and nothing it marks can be in history.
  auto session = OpenSession();
  const auto owned = session->Rebalance().value().owned;
  const auto claimed = session->Claim(owned, 10, 1).value();
  ASSERT_EQ(claimed.size(), 1u);
  EXPECT_EQ(claimed[0].id, waiting_day);
  EXPECT_EQ(session->MarkPublished(Rows(claimed)).value(), 1);

  // Published now, it follows on the next run; a second run with nothing to do changes nothing.
  const auto again = admin->RunRetention({.retention_days = 7, .days_ahead = 7}).value();
  EXPECT_THAT(again.moved_to_history, ElementsAre(Day(-4)));
  EXPECT_THAT(admin->RunRetention({.retention_days = 7, .days_ahead = 7}).value().moved_to_history, IsEmpty());
}

TEST_F(OutboxStoreTest, RetentionDropsEmptyDaysBeyondTheDaysAheadAndKeepsOnesWithRows) {
  // Migration 0001 made the days up to today + 7; the setting is now 2.
  Insert("ch_future", 1, 6, 5, false);  // a writer's clock ahead: its row must not be lost
  auto admin = MakePgOutboxAdmin(db_->url(), "outbox-store-test");
  const auto report = admin->RunRetention({.retention_days = 7, .days_ahead = 2}).value();
  EXPECT_THAT(report.trimmed_ahead, ElementsAre(Day(3), Day(4), Day(6), Day(7)));
  EXPECT_EQ(Partitions("outbox"), "outbox_" + DayDigits(-1) + " outbox_" + DayDigits(0) + " outbox_default ... 3 ahead");
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM outbox WHERE aggregateid = 'ch_future'"), "1");
  // A day left out is still written to: its rows land in outbox_default, where the relay claims them.
  Insert("ch_far", 1, 6, 7, false);
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM outbox_default WHERE aggregateid = 'ch_far'"), "1");
}

// A day under outbox_history must have its parent's columns: one that cannot join stays where it is, the
// pass goes on, and nothing is lost.
TEST_F(OutboxStoreTest, ADayThatCannotJoinHistoryStaysInTheOutboxAndThePassGoesOn) {
  db_->Execute("SELECT outbox_ensure_partitions((now() AT TIME ZONE 'UTC')::date - 3, (now() AT TIME ZONE 'UTC')::date)");
  Insert("ch_a", 1, 1, -3, true);
  Insert("ch_b", 1, 1, -2, true);
  db_->Execute("ALTER TABLE outbox_history ADD COLUMN added_later text");
  auto admin = MakePgOutboxAdmin(db_->url(), "outbox-store-test");
  const auto report = admin->RunRetention({.retention_days = 7, .days_ahead = 7}).value();
  EXPECT_THAT(report.failed, ElementsAre(Day(-3), Day(-2)));
  EXPECT_THAT(report.moved_to_history, IsEmpty());
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM outbox WHERE aggregateid IN ('ch_a', 'ch_b')"), "2");
}

}  // namespace
}  // namespace charge_outbox::outbox
