// What an event's CloudEvents attributes come from, through the real charge store and the relay's claim on
// the real schema: ce_source from the daemon that wrote the row (its session's application_name, migration
// 0009), and ce_time from the same clock as the payload's updated_at (the time the state change carries),
// not from the database's clock at insert.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>

#include "charge_outbox/acquirer/retry_policy.hpp"
#include "charge_outbox/charges/charge_store.hpp"
#include "charge_outbox/outbox/outbox_store.hpp"
#include "charge_outbox/util/sha256.hpp"
#include "await.hpp"
#include "pg_test_database.hpp"

namespace charge_outbox::outbox {
namespace {

using namespace std::chrono_literals;
using testing::Await;
using testing::PgTestDatabase;

constexpr const char* kMerchant = "00000000-0000-4000-8000-00000000000a";

class OutboxEventAttributesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = PgTestDatabase::Create(::testing::UnitTest::GetInstance()->current_test_info()->name(),
                                 PgTestDatabase::Schema::kMigrated);
    db_->Execute(std::string("INSERT INTO merchants (id, name) VALUES ('") + kMerchant + "', 'm')");
  }

  // A store whose sessions say they are `daemon`, as charge-api's and the reconciler's do.
  std::unique_ptr<charges::ChargeStore> StoreOf(const std::string& daemon) {
    databases_.push_back(std::make_unique<db::Database>(
        db_->url(), db::DatabaseOptions{.connections = 1, .application_name = daemon}));
    return charges::MakePgChargeStore(*databases_.back());
  }

  charges::Charge Begin(charges::ChargeStore& store, const std::string& key) {
    charges::NewCharge n;
    n.merchant_id = kMerchant;
    n.idempotency_key = key;
    n.terms.order_id = "order-1";
    n.terms.amount = 1000;
    n.terms.currency = "EUR";
    n.terms.payment_method = "pm_tok_visa";
    n.fingerprint = util::Sha256("fp:" + key);
    const charges::FirstAttempt first{acquirer::NewRequestId(), acquirer::Operation::kCapture, "charge-api"};
    auto r = Await(store.Begin(n, {"owner-" + key, 30s}, first));
    EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().detail);
    return r->charge;
  }

  // The relay's view of every unpublished event, in order.
  std::vector<OutboxEvent> Claim() {
    auto session = MakePgRelaySession(db_->url(), "event-attributes-test");
    EXPECT_TRUE(session->Open().has_value());
    const auto assignment = session->Rebalance();
    EXPECT_TRUE(assignment.has_value());
    auto events = session->Claim(assignment->owned, 100, 16);
    EXPECT_TRUE(events.has_value());
    std::sort(events->begin(), events->end(), [](const auto& a, const auto& b) { return a.position < b.position; });
    return *events;
  }

  std::unique_ptr<PgTestDatabase> db_;
  std::vector<std::unique_ptr<db::Database>> databases_;
};

TEST_F(OutboxEventAttributesTest, TheRowRecordsWhichDaemonWroteIt) {
  auto api = StoreOf("charge-api");
  auto reconciler = StoreOf("reconciler");
  const auto charge = Begin(*api, "k1");
  // The reconciler resolves the charge charge-api left pending.
  charges::Transition t;
  t.to = charges::ChargeStatus::kFailed;
  t.basis = charges::Basis::kAcquirerAnswer;
  t.failure_reason = "not_captured";
  const auto done = Await(reconciler->Complete(charge.id, t, std::nullopt));
  ASSERT_TRUE(done.has_value()) << done.error().detail;
  ASSERT_TRUE(done->applied);

  EXPECT_EQ(db_->Scalar("SELECT string_agg(type || ' ' || producer, ', ' ORDER BY sequence) FROM outbox"),
            "payments.charge.initiated.v1 charge-api, payments.charge.failed.v1 reconciler");
  const auto events = Claim();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].producer, "charge-api");
  EXPECT_EQ(events[1].producer, "reconciler");

  // A writer without an application_name records none: the relay falls back to its configured source.
  db_->Execute("INSERT INTO outbox (id, aggregateid, type, payload, sequence, shard)"
               " VALUES (gen_random_uuid(), 'ch_x', 'payments.charge.initiated.v1', '{}', 1, 1)");
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM outbox WHERE aggregateid = 'ch_x' AND producer IS NULL"), "1");
}

// Every event's time is the database's (issue 41, defect 8): the writing host's clock takes no part, so a
// host running behind cannot date an event before its predecessor, and ce_time is the payload's updated_at.
TEST_F(OutboxEventAttributesTest, CeTimeIsThePayloadsUpdatedAtFromTheDatabasesClock) {
  auto api = StoreOf("charge-api");
  auto reconciler = StoreOf("reconciler");
  const auto captured = Begin(*api, "k1");
  const auto failed = Begin(*api, "k2");
  charges::Transition t;
  t.to = charges::ChargeStatus::kCaptured;
  t.acquirer_capture_id = "cap_1";
  t.deadline = 1h;
  ASSERT_TRUE(Await(api->Complete(captured.id, t, std::nullopt)).has_value());
  charges::Transition f;
  f.to = charges::ChargeStatus::kFailed;
  f.failure_reason = "not_captured";
  ASSERT_TRUE(Await(reconciler->Complete(failed.id, f, std::nullopt)).has_value());
  const auto flagged = Await(reconciler->FlagForReview(captured.id, charges::ChargeStatus::kCaptured,
                                                       "window_missing_at_acquirer", ""));
  ASSERT_TRUE(flagged.has_value()) << flagged.error().detail;
  ASSERT_TRUE(flagged->has_value());

  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM outbox WHERE rfc3339(created_at) <> payload->>'updated_at'"), "0")
      << db_->Scalar("SELECT string_agg(type || ' ' || rfc3339(created_at) || ' vs ' || (payload->>'updated_at'), '; ')"
                     " FROM outbox");
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM outbox WHERE abs(extract(epoch FROM created_at - now())) > 60"), "0");
  const auto events = Claim();
  ASSERT_EQ(events.size(), 5u);  // two initiated, captured, failed, needs_review
  for (const auto& e : events) {
    const auto updated_at = db_->Scalar("SELECT payload->>'updated_at' FROM outbox WHERE id = '" + e.id + "'");
    EXPECT_EQ(e.time, updated_at) << e.type;  // ce_time, as the relay formats it
  }
  // Per charge, each event is dated no earlier than the one before it.
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM outbox a JOIN outbox b ON a.aggregateid = b.aggregateid"
                        " AND b.sequence = a.sequence + 1 WHERE b.created_at < a.created_at"),
            "0");
}

}  // namespace
}  // namespace charge_outbox::outbox
