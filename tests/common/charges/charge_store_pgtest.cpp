// PgChargeStore against a real PostgreSQL with the real schema: the intent and its event in one
// statement, the per-merchant key deciding who is first, leases, takeover, and the conditional
// transition that lets exactly one of two racers win.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include <thread>
#include <vector>

#include "charge_outbox/charges/charge_store.hpp"
#include "charge_outbox/util/sha256.hpp"
#include "await.hpp"
#include "pg_test_database.hpp"

namespace charge_outbox::charges {
namespace {

namespace asio = boost::asio;
using ::testing::HasSubstr;
using testing::Await;
using testing::PgTestDatabase;

constexpr const char* kMerchantA = "00000000-0000-4000-8000-00000000000a";
constexpr const char* kMerchantB = "00000000-0000-4000-8000-00000000000b";

class ChargeStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = PgTestDatabase::Create(::testing::UnitTest::GetInstance()->current_test_info()->name(),
                                 PgTestDatabase::Schema::kMigrated);
    db_->Execute(std::string("INSERT INTO merchants (id, name) VALUES ('") + kMerchantA + "', 'a'), ('" + kMerchantB +
                 "', 'b')");
    database_ = std::make_unique<db::Database>(db_->url(), db::DatabaseOptions{.connections = 4});
    store_ = MakePgChargeStore(*database_);
  }

  static NewCharge Request(const std::string& merchant, const std::string& key, std::int64_t amount = 25000) {
    NewCharge n;
    n.merchant_id = merchant;
    n.idempotency_key = key;
    n.terms.order_id = "PED-0001";
    n.terms.amount = amount;
    n.terms.currency = "BRL";
    n.terms.payment_method = "pm_tok_visa";
    n.terms.description = "cobrança";
    n.traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    n.fingerprint = util::Sha256("fp:" + std::to_string(amount));
    return n;
  }

  BeginResult Begin(const NewCharge& n, const std::string& owner, std::chrono::milliseconds lease) {
    const charges::FirstAttempt first{acquirer::Operation::kCapture, "charge-api", std::chrono::system_clock::now()};
    auto r = Await(store_->Begin(n, {owner, lease}, first));
    EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().detail);
    return *r;
  }

  Transition Captured() {
    Transition t;
    t.to = ChargeStatus::kCaptured;
    t.acquirer_capture_id = "cap_1";
    t.at = std::chrono::system_clock::now();
    t.response_status = 201;
    t.response_body = R"({"status":"captured"})";
    t.traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    return t;
  }

  std::unique_ptr<PgTestDatabase> db_;
  std::unique_ptr<db::Database> database_;
  std::unique_ptr<ChargeStore> store_;
};

TEST_F(ChargeStoreTest, BeginWritesPendingChargeInitiatedEventAndStartedAttempt) {
  const auto r = Begin(Request(kMerchantA, "key-1"), "api-1:r1", std::chrono::seconds{15});
  ASSERT_EQ(r.outcome, BeginOutcome::kCreated);
  EXPECT_EQ(r.attempt_no, 1);
  EXPECT_EQ(r.charge.status, ChargeStatus::kPending);
  EXPECT_EQ(r.charge.last_sequence, 1);
  EXPECT_GT(r.charge.lease_remaining, std::chrono::seconds{14});
  EXPECT_EQ(r.charge.description, "cobrança");

  EXPECT_EQ(db_->Scalar("SELECT type || ' ' || sequence || ' ' || aggregateid FROM outbox"),
            "payments.charge.initiated.v1 1 " + r.charge.public_id());
  EXPECT_EQ(db_->Scalar("SELECT payload->>'status' || ' ' || (payload->>'sequence') || ' ' || (payload->>'amount') "
                        "FROM outbox"),
            "pending 1 25000");
  EXPECT_EQ(db_->Scalar("SELECT payload::jsonb ? 'payment_method' FROM outbox"), "f");
  // Absent fields are left out rather than sent as null.
  EXPECT_EQ(db_->Scalar("SELECT payload::jsonb ? 'acquirer_capture_id' FROM outbox"), "f");
  EXPECT_EQ(db_->Scalar("SELECT shard = outbox_shard(" "'" + r.charge.id + "'::uuid) FROM outbox"), "t");
  EXPECT_EQ(db_->Scalar("SELECT operation || ' ' || actor || ' ' || (finished_at IS NULL) FROM acquirer_attempts"),
            "capture charge-api true");
  EXPECT_EQ(db_->Scalar("SELECT request_id::text FROM acquirer_attempts"), r.first_request_id);
}

TEST_F(ChargeStoreTest, SameKeyIsScopedPerMerchant) {
  EXPECT_EQ(Begin(Request(kMerchantA, "shared"), "o1", std::chrono::seconds{5}).outcome, BeginOutcome::kCreated);
  EXPECT_EQ(Begin(Request(kMerchantB, "shared"), "o2", std::chrono::seconds{5})
                .outcome,
            BeginOutcome::kCreated);
  EXPECT_EQ(db_->Scalar("SELECT count(DISTINCT id) FROM charges"), "2");
}

TEST_F(ChargeStoreTest, SecondBeginSeesLiveOwnerThenMismatchThenTakeover) {
  const auto first = Begin(Request(kMerchantA, "k"), "o1", std::chrono::seconds{30});
  ASSERT_EQ(first.outcome, BeginOutcome::kCreated);

  const auto in_flight = Begin(Request(kMerchantA, "k"), "o2", std::chrono::seconds{30});
  EXPECT_EQ(in_flight.outcome, BeginOutcome::kInFlight);
  EXPECT_EQ(in_flight.charge.id, first.charge.id);
  EXPECT_GT(in_flight.charge.lease_remaining, std::chrono::seconds{25});

  EXPECT_EQ(Begin(Request(kMerchantA, "k", 99), "o3", std::chrono::seconds{30}).outcome,
            BeginOutcome::kFingerprintMismatch);

  db_->Execute("UPDATE charges SET lease_expires_at = now() - interval '1 second'");
  const auto taken = Begin(Request(kMerchantA, "k"), "o4", std::chrono::seconds{30});
  EXPECT_EQ(taken.outcome, BeginOutcome::kTakenOver);
  EXPECT_EQ(taken.charge.owner_id, "o4");
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM outbox"), "1");  // no second initiated event
}

TEST_F(ChargeStoreTest, RetriedBeginOfTheSameOwnerFindsItsOwnRow) {
  ASSERT_EQ(Begin(Request(kMerchantA, "k"), "o1:req", std::chrono::seconds{30}).outcome, BeginOutcome::kCreated);
  const auto again = Begin(Request(kMerchantA, "k"), "o1:req", std::chrono::seconds{30});
  EXPECT_EQ(again.outcome, BeginOutcome::kCreated);
  EXPECT_EQ(again.attempt_no, 1);
  EXPECT_EQ(again.first_request_id, db_->Scalar("SELECT request_id::text FROM acquirer_attempts"));
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM charges"), "1");
}

TEST_F(ChargeStoreTest, CompleteMovesPendingOnceAndAnnouncesIt) {
  const auto begun = Begin(Request(kMerchantA, "k"), "o1", std::chrono::seconds{30});
  AttemptFinish finish{1, std::chrono::system_clock::now(), acquirer::OutcomeKind::kCaptured,
                       acquirer::EvidenceClass::kApproved, 201};
  const auto done = Await(store_->Complete(begun.charge.id, Captured(), finish));
  ASSERT_TRUE(done.has_value()) << done.error().detail;
  EXPECT_TRUE(done->applied);
  EXPECT_EQ(done->charge.status, ChargeStatus::kCaptured);
  EXPECT_EQ(done->charge.acquirer_capture_id, "cap_1");
  EXPECT_EQ(done->charge.response_status, 201);
  EXPECT_EQ(done->charge.response_body, R"({"status":"captured"})");
  EXPECT_EQ(done->charge.last_sequence, 2);
  EXPECT_FALSE(done->charge.owner_id.has_value());
  EXPECT_EQ(db_->Scalar("SELECT string_agg(type || ':' || sequence, ',' ORDER BY sequence) FROM outbox"),
            "payments.charge.initiated.v1:1,payments.charge.captured.v1:2");
  EXPECT_EQ(db_->Scalar("SELECT outcome || ' ' || evidence || ' ' || http_status FROM acquirer_attempts"),
            "captured approved 201");

  // A second transition (the reconciler racing) changes nothing and writes no event.
  Transition failed;
  failed.to = ChargeStatus::kFailed;
  failed.failure_reason = "not_captured";
  failed.at = std::chrono::system_clock::now();
  const auto late = Await(store_->Complete(begun.charge.id, failed, std::nullopt));
  ASSERT_TRUE(late.has_value());
  EXPECT_FALSE(late->applied);
  EXPECT_EQ(late->charge.status, ChargeStatus::kCaptured);
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM outbox"), "2");
}

TEST_F(ChargeStoreTest, ConcurrentCompletesProduceExactlyOneTerminalEvent) {
  const auto begun = Begin(Request(kMerchantA, "k"), "o1", std::chrono::seconds{30});
  asio::io_context io;
  int applied = 0;
  std::vector<ChargeStatus> seen;
  for (int i = 0; i < 8; ++i) {
    asio::co_spawn(io, [&, i]() -> asio::awaitable<void> {
      auto t = Captured();
      if (i % 2 == 1) {
        t.to = ChargeStatus::kFailed;
        t.acquirer_capture_id.reset();
        t.decline_code = "card_declined";
      }
      const auto r = co_await store_->Complete(begun.charge.id, t, std::nullopt);
      if (r && r->applied) ++applied;
      if (r) seen.push_back(r->charge.status);
    }, asio::detached);
  }
  io.run();
  EXPECT_EQ(applied, 1);
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM outbox WHERE type <> 'payments.charge.initiated.v1'"), "1");
  // Every loser sees what won (a loser that waited on the winner's row lock reads it again after the
  // commit), never the `pending` of its own statement's snapshot.
  ASSERT_EQ(seen.size(), 8u);
  const auto won = ParseChargeStatus(db_->Scalar("SELECT status FROM charges"));
  for (const auto status : seen) EXPECT_EQ(status, won);
}

TEST_F(ChargeStoreTest, TheLoserOfACompleteWaitingOnTheWinnersLockReadsWhatWon) {
  const auto begun = Begin(Request(kMerchantA, "k"), "o1", std::chrono::seconds{30});
  // The winner holds the row (uncommitted) while the loser's statement waits for it.
  std::thread winner([&] {
    db_->Execute("BEGIN; UPDATE charges SET status = 'captured', last_sequence = 2, owner_id = NULL;"
                 " SELECT pg_sleep(1); COMMIT;");
  });
  std::this_thread::sleep_for(std::chrono::milliseconds{300});
  const auto lost = Await(store_->Complete(begun.charge.id, Captured(), std::nullopt));
  winner.join();
  ASSERT_TRUE(lost.has_value()) << lost.error().detail;
  EXPECT_FALSE(lost->applied);
  EXPECT_EQ(lost->charge.status, ChargeStatus::kCaptured);
}

// An inference ("nothing was sent", "not found on repeated looks") lands only while its writer holds the
// charge's lease; the acquirer's answer lands whoever holds it.
TEST_F(ChargeStoreTest, AnInferenceLandsOnlyForTheOwnerOfTheLease) {
  const auto begun = Begin(Request(kMerchantA, "k"), "o1", std::chrono::seconds{30});
  Transition inferred;
  inferred.to = ChargeStatus::kFailed;
  inferred.basis = Basis::kInference;
  inferred.failure_reason = "acquirer_unreachable";
  inferred.at = std::chrono::system_clock::now();

  inferred.owner_id = "";
  const auto ownerless = Await(store_->Complete(begun.charge.id, inferred, std::nullopt));
  ASSERT_FALSE(ownerless.has_value());
  EXPECT_EQ(ownerless.error().code, db::DbErrc::kFailed);

  inferred.owner_id = "o2";
  const auto other = Await(store_->Complete(begun.charge.id, inferred, std::nullopt));
  ASSERT_TRUE(other.has_value()) << other.error().detail;
  EXPECT_FALSE(other->applied);
  EXPECT_EQ(other->charge.status, ChargeStatus::kPending);
  EXPECT_EQ(other->charge.owner_id, "o1");

  auto proven = Captured();
  proven.owner_id = "o2";  // not the owner, but the acquirer's answer
  const auto captured = Await(store_->Complete(begun.charge.id, proven, std::nullopt));
  ASSERT_TRUE(captured.has_value()) << captured.error().detail;
  EXPECT_TRUE(captured->applied);
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM outbox"), "2");
}

TEST_F(ChargeStoreTest, AnInferenceOfTheOwnerLands) {
  const auto begun = Begin(Request(kMerchantA, "k"), "o1", std::chrono::seconds{30});
  Transition inferred;
  inferred.to = ChargeStatus::kFailed;
  inferred.basis = Basis::kInference;
  inferred.owner_id = "o1";
  inferred.failure_reason = "acquirer_unreachable";
  inferred.at = std::chrono::system_clock::now();
  const auto done = Await(store_->Complete(begun.charge.id, inferred, std::nullopt));
  ASSERT_TRUE(done.has_value()) << done.error().detail;
  EXPECT_TRUE(done->applied);
  EXPECT_EQ(done->charge.failure_reason, "acquirer_unreachable");
}

TEST_F(ChargeStoreTest, AttemptsAreNumberedPerCharge) {
  const auto begun = Begin(Request(kMerchantA, "k"), "o1", std::chrono::seconds{30});
  const auto second = Await(store_->StartAttempt(
      begun.charge.id, {"33333333-3333-4333-8333-333333333333", acquirer::Operation::kLookup, "reconciler",
                        std::chrono::system_clock::now()}));
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(*second, 2);
  ASSERT_TRUE(Await(store_->FinishAttempt(begun.charge.id, {2, std::chrono::system_clock::now(),
                                                            acquirer::OutcomeKind::kNotFound,
                                                            acquirer::EvidenceClass::kUnknown, 404}))
                  .has_value());
  EXPECT_EQ(db_->Scalar("SELECT outcome || ' ' || evidence FROM acquirer_attempts WHERE attempt_no = 2"),
            "not_found unknown");
}

TEST_F(ChargeStoreTest, ReleaseLetsTheNextRequestTakeOverAtOnce) {
  const auto begun = Begin(Request(kMerchantA, "k"), "o1", std::chrono::seconds{30});
  ASSERT_TRUE(Await(store_->Release(begun.charge.id, "o1",
                                    AttemptFinish{1, std::chrono::system_clock::now(), acquirer::OutcomeKind::kTimedOut,
                                                  acquirer::EvidenceClass::kUnknown, std::nullopt}))
                  .has_value());
  EXPECT_EQ(Begin(Request(kMerchantA, "k"), "o2", std::chrono::seconds{30}).outcome, BeginOutcome::kTakenOver);
  EXPECT_EQ(db_->Scalar("SELECT evidence::text || coalesce(http_status::text, '-') FROM acquirer_attempts"),
            "unknown-");
}

TEST_F(ChargeStoreTest, FindIsScopedPerMerchantAndAuthenticateUsesTheHash) {
  const auto begun = Begin(Request(kMerchantA, "k"), "o1", std::chrono::seconds{30});
  EXPECT_TRUE(Await(store_->FindById(kMerchantA, begun.charge.id)).value().has_value());
  EXPECT_FALSE(Await(store_->FindById(kMerchantB, begun.charge.id)).value().has_value());
  EXPECT_TRUE(Await(store_->FindByKey(kMerchantA, "k")).value().has_value());
  EXPECT_FALSE(Await(store_->FindByKey(kMerchantB, "k")).value().has_value());

  db_->Execute(std::string("INSERT INTO api_keys (key_hash, merchant_id, key_prefix) VALUES "
                           "(sha256(convert_to('sk_test_abc', 'UTF8')), '") + kMerchantA + "', 'sk_test_abc')");
  const auto found = Await(store_->Authenticate("sk_test_abc"));
  ASSERT_TRUE(found.has_value());
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ((*found)->id, kMerchantA);
  EXPECT_FALSE(Await(store_->Authenticate("sk_test_abd")).value().has_value());
  db_->Execute("UPDATE api_keys SET revoked_at = now()");
  EXPECT_FALSE(Await(store_->Authenticate("sk_test_abc")).value().has_value());
}

TEST_F(ChargeStoreTest, PendingOverdueCountsOnlyOldPendingCharges) {
  Begin(Request(kMerchantA, "old"), "o1", std::chrono::seconds{30});
  Begin(Request(kMerchantA, "new"), "o2", std::chrono::seconds{30});
  db_->Execute("UPDATE charges SET created_at = now() - interval '2 hours' WHERE idempotency_key = 'old'");
  EXPECT_EQ(Await(store_->CountPendingOlderThan(std::chrono::hours{1})).value(), 1);
}

TEST_F(ChargeStoreTest, UnreachableDatabaseIsUnavailableNotFailed) {
  db::Database nowhere("postgresql://postgres@127.0.0.1:1/x?connect_timeout=2", {.connections = 1});
  auto store = MakePgChargeStore(nowhere);
  const auto r = Await(store->FindByKey(kMerchantA, "k"));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, db::DbErrc::kUnavailable);
}

}  // namespace
}  // namespace charge_outbox::charges
