// ChargeService's decisions, fast: the service against an in-memory charge store that keeps the SQL's
// rules, a scripted acquirer and a clock that sleeps by advancing itself. Each combination of issue 11
// (an earlier owner, another actor between two statements, a database refusing one statement) is staged
// with the store's FailNext / Before hooks; money_safety_e2etest.cpp runs the same families against the
// real binaries.
#include "charge_service.hpp"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/json/parse.hpp>

#include "acquirer_fakes.hpp"
#include "await.hpp"
#include "charge_outbox/metrics/metrics.hpp"
#include "charge_outbox/util/sha256.hpp"
#include "fake_charge_stores.hpp"
#include "log_capture.hpp"

namespace charge_outbox::charge_api {
namespace {

using namespace std::chrono_literals;
using acquirer::OutcomeKind;
using acquirer::testing::FakeClock;
using acquirer::testing::OutcomeOf;
using acquirer::testing::ScriptedAcquirerClient;
using acquirer::testing::ScriptedRandom;
using charges::ChargeStatus;
using testing::Await;
using testing::FakeChargeStore;
using testing::FakeChargeTable;
using Step = ScriptedAcquirerClient::Step;

constexpr const char* kMerchant = "00000000-0000-4000-8000-00000000000a";

// The scripted client does not compare what it returns with what was asked: kCaptured means "a capture
// that matches the charge", as the real client's classifier would have decided.
acquirer::Capture CaptureOf(acquirer::CaptureStatus status = acquirer::CaptureStatus::kCaptured) {
  acquirer::Capture c;
  c.id = "cap_1";
  c.status = status;
  c.amount = 25000;
  c.currency = "BRL";
  return c;
}

Step Answer(OutcomeKind kind, std::optional<acquirer::Capture> capture = std::nullopt) {
  auto outcome = OutcomeOf(kind);
  outcome.capture = std::move(capture);
  if (kind == OutcomeKind::kDeclined) outcome.decline_code = "card_declined";
  return Step{outcome, 100ms};
}

class ChargeServiceTest : public ::testing::Test {
 protected:
  ChargeServiceTest() {
    request_.amount = 25000;
    request_.currency = "BRL";
    request_.order_id = "PED-1";
    request_.payment_method = "pm_tok_visa";
  }

  // The service, answering from `script`. Two attempts per operation, a 1 s budget, a 3 s lease.
  void Script(std::deque<Step> script,
              ChargeServiceOptions options = ChargeServiceOptions{.instance_id = "api-1", .lease = 3s}) {
    acquirer_ = std::make_unique<ScriptedAcquirerClient>(std::move(script), &clock_);
    service_ =
        std::make_unique<ChargeService>(store_, *acquirer_, policy_, clock_, probe_, late_records_, std::move(options));
  }

  http::Response Create(const std::string& key = "k1") {
    CreateCharge command{kMerchant, key, request_, trace_};
    return Await(service_->Create(std::move(command)));
  }

  // A pending charge for `key` (this test's request) left by an owner that died `age` ago, having
  // started a capture it never finished.
  std::string DeadOwnersCharge(std::chrono::milliseconds age = 10min, const std::string& key = "k1") {
    const auto id = table_.InsertPending(key, age);
    auto& c = table_.row(id).charge;
    c.merchant_id = kMerchant;
    c.fingerprint = RequestFingerprint(request_);
    c.amount = request_.amount;
    return id;
  }

  const charges::Charge& Charge(const std::string& key = "k1") { return table_.charge(*table_.IdByKey(kMerchant, key)); }
  std::vector<std::string> Events(const std::string& key = "k1") {
    return table_.EventTypes(*table_.IdByKey(kMerchant, key));
  }
  static std::string Status(const http::Response& r) {
    return std::string(boost::json::parse(r.body()).at("status").as_string());
  }

  // "Another actor" writes `status` with its event, as its own Complete would.
  void AnotherActorWrites(const std::string& id, ChargeStatus status, std::optional<std::string> reason) {
    auto& row = table_.row(id);
    row.charge.status = status;
    row.charge.failure_reason = std::move(reason);
    row.charge.owner_id.reset();
    row.lease_expires_at.reset();
    table_.AddEvent(row);
  }

  FakeClock clock_;
  FakeChargeTable table_{[this] { return clock_.WallNow(); }};
  FakeChargeStore store_{table_};
  acquirer::RetryPolicy policy_{acquirer::RetryPolicyOptions{2, {100ms, 200ms, retry::Jitter::kFull, 1s}},
                                std::make_shared<ScriptedRandom>(std::vector<double>{0.5})};
  std::shared_ptr<metrics::Registry> registry_ = metrics::NewRegistry();
  ChargeApiProbe probe_{*registry_};
  // What the service keeps for later runs here when a test runs it (RunLateRecords).
  boost::asio::io_context late_io_;
  LateRecords late_records_{late_io_.get_executor(), probe_, {1ms, 1ms}};
  ChargeRequest request_;
  trace::TraceContext trace_ = trace::NewTrace();  // every request's here
  std::unique_ptr<ScriptedAcquirerClient> acquirer_;
  std::unique_ptr<ChargeService> service_;
};

TEST_F(ChargeServiceTest, AFirstCaptureAfterATimeoutCapturesWithEveryAttemptOnRecord) {
  Script({Answer(OutcomeKind::kTimedOut), Answer(OutcomeKind::kCaptured, CaptureOf())});
  const auto r = Create();
  EXPECT_EQ(r.result_int(), 201);
  EXPECT_EQ(Status(r), "captured");
  EXPECT_EQ(Charge().acquirer_capture_id, "cap_1");
  const auto& attempts = table_.row(Charge().id).attempts;
  ASSERT_EQ(attempts.size(), 2u);
  EXPECT_EQ(attempts[0].outcome, OutcomeKind::kTimedOut);
  EXPECT_EQ(attempts[1].outcome, OutcomeKind::kCaptured);
  EXPECT_EQ(Events(), (std::vector<std::string>{"payments.charge.initiated.v1", "payments.charge.captured.v1"}));
}

TEST_F(ChargeServiceTest, AFirstCaptureThatNeverLeftTheProcessFails) {
  Script({Answer(OutcomeKind::kNotSent), Answer(OutcomeKind::kNotSent)});
  const auto r = Create();
  EXPECT_EQ(r.result_int(), 402);
  EXPECT_EQ(Charge().status, ChargeStatus::kFailed);
  EXPECT_EQ(Charge().failure_reason, "acquirer_unreachable");
}

// Issue 14, defect 9: our own pool's queue is not an acquirer answer. The charge stays pending with its
// lease given back, the client hears 503 (retry with the same key), and the retry takes it over.
Step PoolBusy() {
  auto outcome = OutcomeOf(OutcomeKind::kNotSent);
  outcome.transport = acquirer::TransportStatus::kPoolTimedOut;
  return Step{outcome, 100ms};
}

TEST_F(ChargeServiceTest, AFirstCaptureOurOwnPoolNeverSentIs503AndLeavesTheKeyUsable) {
  Script({PoolBusy(), PoolBusy(), Answer(OutcomeKind::kNotFound), Answer(OutcomeKind::kCaptured, CaptureOf())});
  const auto busy = Create();
  EXPECT_EQ(busy.result_int(), 503);
  EXPECT_EQ(busy["Retry-After"], "1");
  const auto problem = boost::json::parse(busy.body());
  EXPECT_EQ(problem.at("type").as_string().ends_with("acquirer-busy"), true) << busy.body();
  EXPECT_EQ(problem.at("charge_id").as_string(), Charge().public_id());
  EXPECT_EQ(Charge().status, ChargeStatus::kPending);
  EXPECT_FALSE(Charge().failure_reason.has_value());
  EXPECT_FALSE(Charge().owner_id.has_value());  // given back: the retry need not wait for the lease

  const auto retried = Create();
  EXPECT_EQ(retried.result_int(), 201);
  EXPECT_EQ(Charge().status, ChargeStatus::kCaptured);
  EXPECT_EQ(acquirer_->lookups.size(), 1u);  // the takeover asked first
}

TEST_F(ChargeServiceTest, ATakeoverWhoseLookupOurOwnPoolNeverSentIs503) {
  DeadOwnersCharge();
  Script({PoolBusy(), PoolBusy()});
  const auto r = Create();
  EXPECT_EQ(r.result_int(), 503);
  EXPECT_EQ(Charge().status, ChargeStatus::kPending);
  EXPECT_FALSE(Charge().owner_id.has_value());
}

TEST_F(ChargeServiceTest, AChargeBeyondTheAcquirerPlacesIs503BeforeItsIntent) {
  Script({Answer(OutcomeKind::kCaptured, CaptureOf())},
         ChargeServiceOptions{.instance_id = "api-1", .lease = 3s, .max_acquirer_runs = 0});
  const auto r = Create();
  EXPECT_EQ(r.result_int(), 503);
  EXPECT_FALSE(boost::json::parse(r.body()).as_object().contains("charge_id"));
  EXPECT_FALSE(table_.IdByKey(kMerchant, "k1").has_value());  // nothing written
  EXPECT_TRUE(acquirer_->captures.empty());                    // nothing sent
}

// Issue 14, defect 5: shutting down ends every charge's work within one attempt or one backoff, with
// what is known recorded and the lease given back, so the drain outlasts it and a retry need not wait.
TEST_F(ChargeServiceTest, WhileDrainingANewChargeIs503BeforeItsIntent) {
  Script({Answer(OutcomeKind::kCaptured, CaptureOf())});
  service_->Drain();
  const auto r = Create();
  EXPECT_EQ(r.result_int(), 503);
  EXPECT_FALSE(table_.IdByKey(kMerchant, "k1").has_value());
  EXPECT_TRUE(acquirer_->captures.empty());
}

TEST_F(ChargeServiceTest, ADrainingRunStopsAfterItsAttemptInFlightAndGivesTheLeaseBack) {
  Script({Answer(OutcomeKind::kTimedOut), Answer(OutcomeKind::kCaptured, CaptureOf())});
  table_.Before("Begin", [&] { service_->Drain(); });  // SIGTERM once the intent is on its way
  const auto r = Create();
  EXPECT_EQ(r.result_int(), 202);
  EXPECT_EQ(acquirer_->captures.size(), 1u);  // no attempt 2
  EXPECT_EQ(Charge().status, ChargeStatus::kPending);
  EXPECT_FALSE(Charge().owner_id.has_value());
}

TEST_F(ChargeServiceTest, ADrainingTakeoverDoesNotStartACapture) {
  DeadOwnersCharge();
  Script({Answer(OutcomeKind::kNotFound), Answer(OutcomeKind::kCaptured, CaptureOf())});
  table_.Before("Begin", [&] { service_->Drain(); });  // SIGTERM once the takeover has begun
  const auto r = Create();
  EXPECT_EQ(r.result_int(), 202);
  EXPECT_EQ(acquirer_->lookups.size(), 1u);
  EXPECT_TRUE(acquirer_->captures.empty());
  EXPECT_EQ(Charge().status, ChargeStatus::kPending);
  EXPECT_FALSE(Charge().owner_id.has_value());
}

// Defect 1: nothing left this run, but a capture of someone else's may have (an actor that ignored the
// lease, or one whose lease ran out): the history read after the run forbids "no money was taken".
TEST_F(ChargeServiceTest, AFirstCaptureThatNeverLeftStaysPendingWhenAnotherCaptureMayHaveLeft) {
  Script({Answer(OutcomeKind::kNotSent), Answer(OutcomeKind::kNotSent)});
  table_.Before("ReadAttemptHistory", [&] {
    auto& row = table_.row(Charge().id);
    row.attempts.push_back(testing::FakeAttempt{9, "req-other", acquirer::Operation::kCapture, "reconciler",
                                                clock_.WallNow(), std::nullopt, std::nullopt, std::nullopt});
  });
  const auto r = Create();
  EXPECT_EQ(r.result_int(), 202);
  EXPECT_EQ(Charge().status, ChargeStatus::kPending);
}

// Defect 1: the combination that told a client "no money was taken" while the acquirer held its capture.
TEST_F(ChargeServiceTest, ATakeoverWhoseLookupNeverLeftStaysPendingAndGivesTheLeaseBack) {
  DeadOwnersCharge();
  Script({Answer(OutcomeKind::kNotSent), Answer(OutcomeKind::kNotSent)});
  const auto r = Create();
  EXPECT_EQ(r.result_int(), 202);
  EXPECT_EQ(Status(r), "pending");
  EXPECT_EQ(Charge().status, ChargeStatus::kPending);
  EXPECT_FALSE(Charge().owner_id.has_value());
  EXPECT_TRUE(acquirer_->captures.empty());
  EXPECT_EQ(Events(), std::vector<std::string>{"payments.charge.initiated.v1"});
}

TEST_F(ChargeServiceTest, ATakeoverWhoseCaptureNeverLeftStaysPending) {
  DeadOwnersCharge();
  Script({Answer(OutcomeKind::kNotFound), Answer(OutcomeKind::kNotSent), Answer(OutcomeKind::kNotSent)});
  const auto r = Create();
  EXPECT_EQ(r.result_int(), 202);
  EXPECT_EQ(Charge().status, ChargeStatus::kPending);
  EXPECT_EQ(table_.Calls("ReadAttemptHistory"), 0);  // a takeover never even asks
}

TEST_F(ChargeServiceTest, ATakeoverThatFindsTheCaptureRecordsIt) {
  DeadOwnersCharge();
  Script({Answer(OutcomeKind::kCaptured, CaptureOf())});
  const auto r = Create();
  EXPECT_EQ(r.result_int(), 201);
  EXPECT_EQ(Charge().status, ChargeStatus::kCaptured);
  EXPECT_TRUE(acquirer_->captures.empty());
}

// Defect 2.
TEST_F(ChargeServiceTest, ATakeoverThatFindsTheCaptureVoidedGoesToReviewBeforeTheDeadline) {
  DeadOwnersCharge();
  Script({Answer(OutcomeKind::kCaptured, CaptureOf(acquirer::CaptureStatus::kVoided))});
  const auto r = Create();
  EXPECT_EQ(r.result_int(), 202);
  EXPECT_EQ(Status(r), "needs_review");
  EXPECT_EQ(Charge().failure_reason, "acquirer_capture_voided");
}

TEST_F(ChargeServiceTest, ATakeoverThatFindsTheCaptureVoidedPastTheDeadlineRecordsCanceled) {
  DeadOwnersCharge(2h);
  Script({Answer(OutcomeKind::kCaptured, CaptureOf(acquirer::CaptureStatus::kVoided))});
  const auto r = Create();
  EXPECT_EQ(r.result_int(), 402);
  EXPECT_EQ(Charge().status, ChargeStatus::kCanceled);
  EXPECT_EQ(Charge().failure_reason, "deadline_passed_voided");
}

// Defect 3: proof of money against a no-money state written first by someone else.
TEST_F(ChargeServiceTest, AProvenCaptureThatLosesToAFailureGoesToReviewWithItsEvent) {
  Script({Answer(OutcomeKind::kCaptured, CaptureOf())});
  table_.Before("Complete", [&] { AnotherActorWrites(Charge().id, ChargeStatus::kFailed, "not_captured"); });
  const auto r = Create();
  EXPECT_EQ(r.result_int(), 202);
  EXPECT_EQ(Status(r), "needs_review");
  EXPECT_EQ(Charge().status, ChargeStatus::kNeedsReview);
  EXPECT_EQ(Charge().failure_reason, "acquirer_capture_contradicts_failed");
  EXPECT_EQ(Events(), (std::vector<std::string>{"payments.charge.initiated.v1", "payments.charge.failed.v1",
                                                "payments.charge.needs_review.v1"}));
}

// Defect 4: an attempt that cannot be recorded is not sent, whatever the database error.
TEST_F(ChargeServiceTest, AnAttemptThatCannotBeRecordedIsNotSent) {
  for (const auto code : {db::DbErrc::kFailed, db::DbErrc::kUnavailable}) {
    table_ = FakeChargeTable{[this] { return clock_.WallNow(); }};
    Script({Answer(OutcomeKind::kTimedOut), Answer(OutcomeKind::kCaptured, CaptureOf())});
    // Attempt 2's start is refused (a transient error: refused on every one of its retries too).
    for (int i = 0; i < 4; ++i) table_.FailNext("StartAttempt", code);
    const auto r = Create("k-" + std::string(db::ToString(code)));
    EXPECT_EQ(r.result_int(), 202) << db::ToString(code);
    EXPECT_EQ(acquirer_->captures.size(), 1u) << db::ToString(code);
  }
}

TEST_F(ChargeServiceTest, ATakeoverLookupThatCannotBeRecordedIsNotSentAndConcludesNothing) {
  DeadOwnersCharge();
  Script({});
  for (int i = 0; i < 8; ++i) table_.FailNext("StartAttempt", db::DbErrc::kFailed);
  const auto r = Create();
  EXPECT_EQ(r.result_int(), 202);
  EXPECT_TRUE(acquirer_->lookups.empty());
  EXPECT_EQ(Charge().status, ChargeStatus::kPending);
}

// Defect 5: an inference ("nothing left") lands only while this request still owns the charge.
TEST_F(ChargeServiceTest, AnInferredFailureDoesNotLandOnceAnotherActorOwnsTheCharge) {
  Script({Answer(OutcomeKind::kNotSent), Answer(OutcomeKind::kNotSent)});
  table_.Before("Complete", [&] {
    auto& row = table_.row(Charge().id);
    row.charge.owner_id = "reconciler/run";
    row.lease_expires_at = clock_.WallNow() + 90s;
  });
  const auto r = Create();
  EXPECT_EQ(r.result_int(), 202);
  EXPECT_EQ(Status(r), "pending");
  EXPECT_EQ(Charge().status, ChargeStatus::kPending);
  EXPECT_EQ(Events(), std::vector<std::string>{"payments.charge.initiated.v1"});
}

// ... while a proven capture lands whoever holds the charge.
TEST_F(ChargeServiceTest, AProvenCaptureLandsEvenOnceAnotherActorOwnsTheCharge) {
  Script({Answer(OutcomeKind::kCaptured, CaptureOf())});
  table_.Before("Complete", [&] { table_.row(Charge().id).charge.owner_id = "reconciler/run"; });
  EXPECT_EQ(Create().result_int(), 201);
  EXPECT_EQ(Charge().status, ChargeStatus::kCaptured);
}

// Defect 6: the loser answers what won.
TEST_F(ChargeServiceTest, TheLoserOfACompletionAnswersWhatWon) {
  Script({Answer(OutcomeKind::kCaptured, CaptureOf())});
  table_.Before("Complete", [&] { AnotherActorWrites(Charge().id, ChargeStatus::kCaptured, std::nullopt); });
  const auto r = Create();
  EXPECT_EQ(r.result_int(), 201);
  EXPECT_EQ(Status(r), "captured");
  EXPECT_EQ(Events(), (std::vector<std::string>{"payments.charge.initiated.v1", "payments.charge.captured.v1"}));
}

// Defect 7.
TEST_F(ChargeServiceTest, ALongKeyIsSentToTheAcquirerHashed) {
  const std::string key(240, 'k');
  Script({Answer(OutcomeKind::kCaptured, CaptureOf())});
  EXPECT_EQ(Create(key).result_int(), 201);
  ASSERT_EQ(acquirer_->captures.size(), 1u);
  EXPECT_EQ(acquirer_->captures[0].idempotency_key, std::string(kMerchant) + "#" + util::Sha256Hex(key));
}

// Defect 8: past the deadline a takeover never captures.
TEST_F(ChargeServiceTest, PastTheDeadlineATakeoverNeverCaptures) {
  DeadOwnersCharge(2h);
  Script({Answer(OutcomeKind::kNotFound)});
  const auto r = Create();
  EXPECT_EQ(r.result_int(), 202);
  EXPECT_EQ(Status(r), "pending");
  EXPECT_TRUE(acquirer_->captures.empty());
  EXPECT_FALSE(Charge().owner_id.has_value());
}

TEST_F(ChargeServiceTest, PastTheDeadlineATakeoverLeavesAFoundCaptureToTheReconcilersVoid) {
  DeadOwnersCharge(2h);
  Script({Answer(OutcomeKind::kCaptured, CaptureOf())});
  const auto r = Create();
  EXPECT_EQ(r.result_int(), 202);
  EXPECT_EQ(Charge().status, ChargeStatus::kPending);
  EXPECT_TRUE(acquirer_->voids.empty());
}

// Defect 9: the takeover renews its lease between its lookup and its capture...
TEST_F(ChargeServiceTest, ATakeoverRenewsItsLeaseBeforeItCaptures) {
  DeadOwnersCharge();
  Script({Step{OutcomeOf(OutcomeKind::kNotFound), 2500ms}, Answer(OutcomeKind::kCaptured, CaptureOf())});
  // Recording the capture's attempt (the second StartAttempt: the lookup's is the first) renews the lease.
  table_.Before("StartAttempt", [&] {
    table_.Before("StartAttempt", [&] {
      // The lookup took 2.5 s of the 3 s lease: before the renewal, half a second is left.
      EXPECT_LE(Charge().lease_remaining, 600ms);
    });
  });
  table_.Before("Complete", [&] { EXPECT_GT(Charge().lease_remaining, 2s); });
  EXPECT_EQ(Create().result_int(), 201);
  EXPECT_EQ(table_.Calls("StartAttempt"), 2);
}

// ... and captures nothing if the charge is no longer its own.
TEST_F(ChargeServiceTest, ATakeoverThatLostItsChargeBeforeTheCaptureDoesNotCapture) {
  DeadOwnersCharge();
  Script({Answer(OutcomeKind::kNotFound)});
  table_.Before("StartAttempt", [&] {
    table_.Before("StartAttempt", [&] { table_.row(Charge().id).charge.owner_id = "reconciler/run"; });
  });
  const auto r = Create();
  EXPECT_EQ(r.result_int(), 202);
  EXPECT_TRUE(acquirer_->captures.empty());
}

// Defect 10: a charge flagged for review since its first answer replays what GET shows.
TEST_F(ChargeServiceTest, AReplayOfAFlaggedChargeAnswersItsCurrentState) {
  Script({Answer(OutcomeKind::kCaptured, CaptureOf())});
  ASSERT_EQ(Create().result_int(), 201);
  const auto flagged = Await(store_.FlagForReview(Charge().id, ChargeStatus::kCaptured, "window_mismatch", ""));
  ASSERT_TRUE(flagged && flagged->has_value());
  const auto replay = Create();
  EXPECT_EQ(replay.result_int(), 202);
  EXPECT_EQ(replay["Idempotent-Replayed"], "true");
  EXPECT_EQ(Status(replay), "needs_review");
  const auto got = Await(service_->Get(kMerchant, Charge().public_id()));
  EXPECT_EQ(boost::json::parse(got.body()), boost::json::parse(replay.body()));
}

// Issue 43: the answers that ask the client to come back say when, from what the service knows. Here a
// 30 s lease, runs of at most 6 s (a 5 s request timeout and a 1 s budget), 4 s between its own retries.
class ChargeServiceRetryAfterTest : public ChargeServiceTest {
 protected:
  void Start(std::deque<Step> script) {
    acquirer_ = std::make_unique<ScriptedAcquirerClient>(std::move(script), &clock_);
    service_ = std::make_unique<ChargeService>(
        store_, *acquirer_, paced_policy_, clock_, probe_, late_records_,
        ChargeServiceOptions{.instance_id = "api-1", .lease = 30s, .acquirer_request_timeout = 5s});
  }

  // A request of another instance owns the key's charge: its latest call started `since` ago.
  void LiveOwnersCharge(std::chrono::milliseconds since) {
    auto& row = table_.row(DeadOwnersCharge(1min));
    row.charge.owner_id = "api-2/request";
    row.lease_expires_at = clock_.WallNow() + 30s - since;
  }

  acquirer::RetryPolicy paced_policy_{acquirer::RetryPolicyOptions{2, {100ms, 4s, retry::Jitter::kFull, 1s}},
                                      std::make_shared<ScriptedRandom>(std::vector<double>{0.5})};
};

// Before, a 409 asked for the whole remaining lease (30 s here) although the owner's run ends within 6 s.
TEST_F(ChargeServiceRetryAfterTest, A409SaysWhenTheRequestInFlightShouldBeDoneNotWhenItsLeaseEnds) {
  Start({});
  LiveOwnersCharge(0s);
  auto r = Create();
  ASSERT_EQ(r.result_int(), 409);
  EXPECT_EQ(r["Retry-After"], "6");
  table_.row(Charge().id).lease_expires_at = clock_.WallNow() + 27s;  // its call started 3 s ago
  EXPECT_EQ(Create()["Retry-After"], "3");
  // Overdue (its call started 10 s ago): a retry takes the charge over when the lease ends, in 20 s.
  table_.row(Charge().id).lease_expires_at = clock_.WallNow() + 20s;
  EXPECT_EQ(Create()["Retry-After"], "20");
  EXPECT_TRUE(acquirer_->captures.empty());
}

TEST_F(ChargeServiceRetryAfterTest, A202GivenBackIsRetriedSoonWithLocation) {
  Start({Answer(OutcomeKind::kTimedOut), Answer(OutcomeKind::kTimedOut)});
  const auto r = Create();
  ASSERT_EQ(r.result_int(), 202);
  EXPECT_EQ(r["Location"], "/v1/charges/" + Charge().public_id());
  EXPECT_EQ(r["Retry-After"], "4");  // the longest pause of our own retries
  EXPECT_FALSE(Charge().owner_id.has_value());
}

TEST_F(ChargeServiceRetryAfterTest, A202WhoseLeaseWasNotGivenBackWaitsForTheLease) {
  Start({Answer(OutcomeKind::kTimedOut), Answer(OutcomeKind::kTimedOut)});
  table_.FailNext("Release", db::DbErrc::kUnavailable);
  const auto r = Create();
  ASSERT_EQ(r.result_int(), 202);
  EXPECT_EQ(r["Retry-After"], "30");  // a retry sooner meets this request's lease: 409
}

TEST_F(ChargeServiceRetryAfterTest, A202OnlyTheReconcilerCanResolveWaitsForItsRun) {
  DeadOwnersCharge(2h);
  Start({Answer(OutcomeKind::kNotFound)});
  const auto r = Create();
  ASSERT_EQ(r.result_int(), 202);
  EXPECT_EQ(Status(r), "pending");
  EXPECT_EQ(r["Retry-After"], "60");
}

TEST_F(ChargeServiceRetryAfterTest, A202UnderReviewWaitsForAPersonFirstAnswerAndReplayAlike) {
  DeadOwnersCharge();
  Start({Answer(OutcomeKind::kCaptured, CaptureOf(acquirer::CaptureStatus::kVoided))});
  const auto first = Create();
  ASSERT_EQ(Status(first), "needs_review");
  EXPECT_EQ(first["Retry-After"], "3600");
  const auto replay = Create();
  EXPECT_EQ(replay["Idempotent-Replayed"], "true");
  EXPECT_EQ(replay["Retry-After"], "3600");
  EXPECT_EQ(replay["Location"], "/v1/charges/" + Charge().public_id());
}

// Issue 41, defect 2: an intent whose commit stays unknown (the connection died after the commit, and the
// re-check found the database gone) is answered 503 without a word about the key's charge, nothing is
// sent, and the attempt 1 it left unfinished goes on record as never sent as soon as the database takes
// it. Before the fix that attempt stayed unfinished ("a capture may have left"), and the reconciler's
// default policy later captured a charge whose client was only told to retry.
TEST_F(ChargeServiceTest, AnIntentWhoseCommitStaysUnknownIs503AndItsUnsentAttemptGoesOnRecord) {
  Script({});
  table_.LoseAnswerNext("Begin");
  table_.BeforeCall("Begin", 2, [&] { table_.FailNext("Begin", db::DbErrc::kUnavailable); });
  const auto r = Create();
  EXPECT_EQ(r.result_int(), 503);
  const auto body = boost::json::parse(r.body()).as_object();
  EXPECT_EQ(body.at("type").as_string(), "urn:charge-outbox:problem:unavailable");
  EXPECT_EQ(std::string(body.at("detail").as_string()).find("othing was charged"), std::string::npos);
  EXPECT_TRUE(acquirer_->captures.empty());
  const auto id = Charge().id;
  EXPECT_TRUE(Await(store_.ReadAttemptHistory(id))->capture_may_have_left);
  EXPECT_EQ(late_records_.Outstanding(), 1);

  late_io_.run();
  EXPECT_EQ(late_records_.Outstanding(), 0);
  EXPECT_FALSE(Await(store_.ReadAttemptHistory(id))->capture_may_have_left);
  EXPECT_FALSE(Charge().owner_id.has_value());  // its lease given back: a retry takes over at once
}

TEST_F(ChargeServiceTest, AnUnsentAttemptTheDatabaseRefusesIsKeptUntilItIsOnRecord) {
  Script({});
  table_.LoseAnswerNext("Begin");
  table_.BeforeCall("Begin", 2, [&] { table_.FailNext("Begin", db::DbErrc::kUnavailable); });
  for (int i = 0; i < 3; ++i) table_.FailNext("AbandonIntent", db::DbErrc::kUnavailable);
  EXPECT_EQ(Create().result_int(), 503);
  late_io_.run();
  EXPECT_EQ(table_.Calls("AbandonIntent"), 4);
  EXPECT_FALSE(Await(store_.ReadAttemptHistory(Charge().id))->capture_may_have_left);
}

// ... and a run answered 503 acquirer-busy (nothing left: our own pool was full) whose release could not
// be written keeps its not_sent finish until it is on record.
TEST_F(ChargeServiceTest, ABusyRunsNotSentFinishIsKeptWhenItsReleaseCannotBeWritten) {
  auto queued = OutcomeOf(OutcomeKind::kNotSent);
  queued.transport = acquirer::TransportStatus::kPoolTimedOut;
  Script({Step{queued, 100ms}, Step{queued, 100ms}});
  table_.FailNext("Release", db::DbErrc::kUnavailable);
  const auto r = Create();
  EXPECT_EQ(r.result_int(), 503);
  EXPECT_EQ(boost::json::parse(r.body()).at("type").as_string(), "urn:charge-outbox:problem:acquirer-busy");
  EXPECT_TRUE(Await(store_.ReadAttemptHistory(Charge().id))->capture_may_have_left);
  late_io_.run();
  EXPECT_FALSE(Await(store_.ReadAttemptHistory(Charge().id))->capture_may_have_left);
}

// Issue 41, defect 4: a proof of capture against a `failed` another actor wrote first, whose review flag
// cannot be written, is answered "under review", never with the failure's "no money was taken". Before
// the fix the client got the contradicted 402 while charge-api held the acquirer's 201.
TEST_F(ChargeServiceTest, AContradictionWhoseFlagCannotBeWrittenIsAnsweredUnderReview) {
  Script({Answer(OutcomeKind::kCaptured, CaptureOf())});
  table_.Before("Complete", [&] { AnotherActorWrites(Charge().id, ChargeStatus::kFailed, "not_captured"); });
  table_.FailNext("FlagForReview", db::DbErrc::kFailed);
  const auto r = Create();
  EXPECT_EQ(r.result_int(), 202);
  EXPECT_EQ(Status(r), "needs_review");
  EXPECT_EQ(boost::json::parse(r.body()).at("failure_reason").as_string(), "acquirer_capture_contradicts_failed");
  EXPECT_EQ(Charge().status, ChargeStatus::kFailed);  // the record waits for a person or the window report
}

// ... and one another actor flagged first is answered as it is now: under review.
TEST_F(ChargeServiceTest, AContradictionFlaggedFirstByAnotherActorIsAnsweredAsItIsNow) {
  Script({Answer(OutcomeKind::kCaptured, CaptureOf())});
  table_.Before("Complete", [&] { AnotherActorWrites(Charge().id, ChargeStatus::kFailed, "not_captured"); });
  table_.Before("FlagForReview",
                [&] { AnotherActorWrites(Charge().id, ChargeStatus::kNeedsReview, "window_mismatch"); });
  const auto r = Create();
  EXPECT_EQ(r.result_int(), 202);
  EXPECT_EQ(Status(r), "needs_review");
  EXPECT_EQ(boost::json::parse(r.body()).at("failure_reason").as_string(), "window_mismatch");
}

// Issue 41, defect 5: a request that lost its charge between two attempts (its lease ran out while it
// backed off, and the reconciler claimed the charge) sends no further capture, and answers with what the
// charge is now. Before the fix its next attempt was recorded and sent beside the reconciler's work.
TEST_F(ChargeServiceTest, ARequestThatLostItsChargeBetweenAttemptsSendsNothingMore) {
  Script({Answer(OutcomeKind::kTimedOut), Answer(OutcomeKind::kCaptured, CaptureOf())});
  table_.Before("StartAttempt", [&] {
    auto& row = table_.row(Charge().id);
    row.charge.owner_id = "reconciler/run";
    row.lease_expires_at = clock_.WallNow() + 90s;
  });
  const auto r = Create();
  EXPECT_EQ(acquirer_->captures.size(), 1u);
  EXPECT_EQ(r.result_int(), 202);
  EXPECT_EQ(Status(r), "pending");
  EXPECT_EQ(Charge().owner_id, "reconciler/run");  // not given back: it is not this request's
}

// Issue 41, defect 6: a takeover judges the deadline as of its lookup's answer: one whose lookup ended
// past the deadline captures nothing. Before the fix it judged it before the lookup and then captured.
TEST_F(ChargeServiceTest, ATakeoverWhoseLookupEndsPastTheDeadlineCapturesNothing) {
  DeadOwnersCharge(1h - 1s);
  Script({Step{OutcomeOf(OutcomeKind::kNotFound), 2s}, Answer(OutcomeKind::kCaptured, CaptureOf())});
  const auto r = Create();
  EXPECT_EQ(r.result_int(), 202);
  EXPECT_TRUE(acquirer_->captures.empty());
  EXPECT_EQ(Charge().status, ChargeStatus::kPending);
}

// Issue 41, defect 8: the answer carries the database's time, the same the charge and its event carry.
TEST_F(ChargeServiceTest, TheAnswerCarriesTheTimeTheStatementWrote) {
  Script({Answer(OutcomeKind::kCaptured, CaptureOf())});
  const auto r = Create();
  ASSERT_EQ(r.result_int(), 201);
  const auto updated = std::string(boost::json::parse(r.body()).at("updated_at").as_string());
  EXPECT_EQ(updated, charges::FormatTimestamp(Charge().updated_at));
  EXPECT_NE(updated, "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(Create().body(), r.body());  // the replay is the stored answer, byte for byte
}

// Issue 14, defect 10 (docs/openapi.yaml's 404 is problem+json): an id that is not a charge id is not
// echoed, since GET /v1/charges/%FF decodes to a byte that is not UTF-8 and the body would not be JSON.
TEST_F(ChargeServiceTest, AnIdThatIsNotAChargeIdIs404WithAJsonBodyWhateverItsBytes) {
  const auto got = Await(service_->Get(kMerchant, "\xff\xc3("));
  EXPECT_EQ(got.result_int(), 404);
  boost::system::error_code ec;
  const auto body = boost::json::parse(got.body(), ec);
  ASSERT_FALSE(ec) << got.body();
  EXPECT_EQ(body.at("status"), 404);
}

// Issue 14, defect 6: every line about a charge carries the trace id of the request working on it, also
// where the code that logs it (giving the lease back, reading the attempt history, recording attempts,
// settling) was handed no trace before. The thread holds another trace id meanwhile, as another request
// on an I/O thread could: a line must carry the request's, never the thread's.
class ChargeServiceTraceTest : public ChargeServiceTest {
 protected:
  static constexpr const char* kOtherTrace = "0123456789abcdef0123456789abcdef";

  http::Response CreateWhileTheThreadHoldsAnotherTraceId() {
    log::ScopedTraceId other(kOtherTrace);
    return Create();
  }

  // Each line containing `text` (there is at least one) carries this test's request's trace id.
  void ExpectLinesCarryTheRequestsTraceId(const std::string& text) {
    const auto lines = captured_.LinesWith(text);
    ASSERT_FALSE(lines.empty()) << "no line says: " << text;
    for (const auto& line : lines) {
      EXPECT_EQ(testing::LogCapture::TraceIdOf(line), trace_.trace_id) << boost::json::serialize(line);
    }
  }

  testing::LogCapture captured_;
};

TEST_F(ChargeServiceTraceTest, ALeaseNotGivenBackIsLoggedUnderTheRequestsTraceId) {
  Script({Answer(OutcomeKind::kTimedOut), Answer(OutcomeKind::kTimedOut)});
  table_.FailNext("Release", db::DbErrc::kFailed);
  EXPECT_EQ(CreateWhileTheThreadHoldsAnotherTraceId().result_int(), 202);
  ExpectLinesCarryTheRequestsTraceId("not released");
}

TEST_F(ChargeServiceTraceTest, AnAttemptHistoryNotReadIsLoggedUnderTheRequestsTraceId) {
  Script({Answer(OutcomeKind::kNotSent), Answer(OutcomeKind::kNotSent)});
  table_.FailNext("ReadAttemptHistory", db::DbErrc::kFailed);
  EXPECT_EQ(CreateWhileTheThreadHoldsAnotherTraceId().result_int(), 202);
  ExpectLinesCarryTheRequestsTraceId("attempt history not read");
}

TEST_F(ChargeServiceTraceTest, AttemptsNotRecordedAreLoggedUnderTheRequestsTraceId) {
  Script({Answer(OutcomeKind::kTimedOut), Answer(OutcomeKind::kCaptured, CaptureOf())});
  // Attempt 1's finish, written before attempt 2 starts, is refused; then attempt 2's start.
  table_.FailNext("FinishAttempt", db::DbErrc::kFailed);
  table_.FailNext("StartAttempt", db::DbErrc::kFailed);
  EXPECT_EQ(CreateWhileTheThreadHoldsAnotherTraceId().result_int(), 202);
  ExpectLinesCarryTheRequestsTraceId("not finished on record");
  ExpectLinesCarryTheRequestsTraceId("not recorded, so not sent");
}

TEST_F(ChargeServiceTraceTest, AContradictionAndItsUnwrittenFlagAreLoggedUnderTheRequestsTraceId) {
  Script({Answer(OutcomeKind::kCaptured, CaptureOf())});
  table_.Before("Complete", [&] { AnotherActorWrites(Charge().id, ChargeStatus::kFailed, "not_captured"); });
  table_.FailNext("FlagForReview", db::DbErrc::kFailed);
  CreateWhileTheThreadHoldsAnotherTraceId();
  ExpectLinesCarryTheRequestsTraceId("but the charge was already failed");
  ExpectLinesCarryTheRequestsTraceId("flagging the contradiction for review failed");
}

}  // namespace
}  // namespace charge_outbox::charge_api
