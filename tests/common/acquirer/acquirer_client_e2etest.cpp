// HttpAcquirerClient against the real acquirer-sim process: every fault the simulator injects ends in
// the evidence class docs/charge-states.md asks for, a capture whose answer never came is found by its key,
// the ledger survives a SIGKILL of the simulator, and 50 concurrent captures with one key (retried by
// the policy through 409s) make exactly one capture. Each test starts its own simulator (port 0, its
// own data directory); the client's io_context runs on a thread of its own, as in a daemon.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <csignal>
#include <filesystem>
#include <future>
#include <set>
#include <thread>

#include "charge_outbox/acquirer/acquirer_client.hpp"
#include "charge_outbox/acquirer/http_acquirer_client.hpp"
#include "charge_outbox/acquirer/retry_policy.hpp"
#include "http_test_client.hpp"
#include "printers.hpp"
#include "service_process.hpp"
#include "test_env.hpp"

namespace charge_outbox::acquirer {
namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using namespace std::chrono_literals;
using charge_outbox::testing::HttpTestClient;
using charge_outbox::testing::ServiceProcess;

constexpr const char* kApiKey = "sk_e2e_merchant_a";

CaptureRequest Request(const std::string& key, const std::string& reference,
                       const std::string& payment_method = "pm_tok_visa", std::int64_t amount = 25000) {
  return CaptureRequest{key, amount, "BRL", reference, payment_method};
}

LookupRequest LookupFor(const CaptureRequest& request) {
  return LookupRequest{request.idempotency_key,
                       ExpectedCapture{request.amount, request.currency, request.reference}};
}

class AcquirerClientE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / charge_outbox::testing::UniqueName("acquirer_client_e2e");
    StartSim();
    io_thread_ = std::thread([this] { io_.run(); });
  }

  void TearDown() override {
    client_.reset();
    work_.reset();
    io_thread_.join();
    sim_.reset();
    fs::remove_all(dir_);
  }

  void StartSim() {
    sim_ = std::make_unique<ServiceProcess>(
        std::vector<std::string>{ACQUIRER_SIM_BIN},
        charge_outbox::testing::EnvChanges{{"HTTP_PORT", "0"},
                                           {"DATA_DIR", (dir_ / "data").string()},
                                           {"AUTH_API_KEYS", std::string(kApiKey) + ",sk_e2e_merchant_b"},
                                           {"SHUTDOWN_DEADLINE", "2s"}});
    admin_ = std::make_unique<HttpTestClient>(sim_->port());
    client_ = std::make_unique<HttpAcquirerClient>(io_.get_executor(), Config());
  }

  AcquirerClientConfig Config(std::string api_key = kApiKey) const {
    AcquirerClientConfig c;
    c.base_url = "http://127.0.0.1:" + std::to_string(sim_->port());
    c.api_key = std::move(api_key);
    c.connect_timeout = 2s;
    c.request_timeout = request_timeout_;
    c.max_connections = 64;
    return c;
  }

  // Runs `awaitable` on the client's thread and waits for it.
  template <typename T>
  T Await(asio::awaitable<T> awaitable) {
    auto future = asio::co_spawn(io_, std::move(awaitable), asio::use_future);
    if (future.wait_for(60s) != std::future_status::ready) throw std::runtime_error("acquirer call did not finish");
    return future.get();
  }

  AttemptOutcome Capture(const CaptureRequest& request) { return Await(client_->Capture(request, NewRequestId())); }
  AttemptOutcome Lookup(const LookupRequest& request) { return Await(client_->LookupByKey(request, NewRequestId())); }

  void SetFaults(const std::string& profile) {
    const auto r = admin_->Put("/admin/faults", profile);
    ASSERT_EQ(r.status(), 200u) << r.response.body();
  }

  // Captures (not voids) the simulator made under `key`, from its ground-truth ledger.
  std::vector<std::string> LedgerCaptureIds(const std::string& key) {
    const auto r = admin_->Get("/admin/ledger");
    EXPECT_EQ(r.status(), 200u);
    std::vector<std::string> ids;
    const auto ledger = r.json();  // named: iterating into a temporary would dangle
    for (const auto& entry : ledger.at("entries").as_array()) {
      const auto& e = entry.as_object();
      if (e.at("type").as_string() == "capture" && e.at("idempotency_key").as_string() == key) {
        ids.emplace_back(e.at("id").as_string());
      }
    }
    return ids;
  }

  std::int64_t InFlight() { return admin_->Get("/admin/stats").json().at("in_flight").as_int64(); }

  fs::path dir_;
  std::chrono::milliseconds request_timeout_{5s};
  std::unique_ptr<ServiceProcess> sim_;
  std::unique_ptr<HttpTestClient> admin_;
  asio::io_context io_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_{io_.get_executor()};
  std::thread io_thread_;
  std::unique_ptr<HttpAcquirerClient> client_;
};

TEST_F(AcquirerClientE2E, ApprovedThenReplayedWithTheSameCapture) {
  const auto request = Request("m1:approved-1", "ch_1");
  const auto first = Capture(request);
  ASSERT_EQ(first.kind, OutcomeKind::kCaptured) << first.detail;
  EXPECT_EQ(first.evidence(), EvidenceClass::kApproved);
  EXPECT_THAT(first.capture->id, ::testing::StartsWith("cap_"));
  const auto again = Capture(request);
  ASSERT_EQ(again.kind, OutcomeKind::kCaptured) << again.detail;
  EXPECT_EQ(again.capture->id, first.capture->id);
  EXPECT_TRUE(again.reused_connection);
  EXPECT_THAT(LedgerCaptureIds(request.idempotency_key), ::testing::ElementsAre(first.capture->id));
}

TEST_F(AcquirerClientE2E, DeterministicDeclinesAreDeclinedAndCaptureNothing) {
  const auto declined = Capture(Request("m1:declined-1", "ch_1", "pm_tok_declined"));
  EXPECT_EQ(declined.kind, OutcomeKind::kDeclined) << declined.detail;
  EXPECT_EQ(declined.evidence(), EvidenceClass::kDeclined);
  EXPECT_EQ(declined.decline_code, "card_declined");
  const auto insufficient = Capture(Request("m1:declined-2", "ch_2", "pm_tok_insufficient"));
  EXPECT_EQ(insufficient.decline_code, "insufficient_funds");
  EXPECT_TRUE(LedgerCaptureIds("m1:declined-1").empty());
  // A decline is not a capture: lookups do not find one.
  EXPECT_EQ(Lookup(LookupRequest{"m1:declined-1", std::nullopt}).kind, OutcomeKind::kNotFound);
}

TEST_F(AcquirerClientE2E, SameKeyOtherBodyAndBadCredentialsAreContractErrors) {
  ASSERT_EQ(Capture(Request("m1:k", "ch_1")).kind, OutcomeKind::kCaptured);
  const auto other_body = Capture(Request("m1:k", "ch_1", "pm_tok_visa", 1));
  EXPECT_EQ(other_body.kind, OutcomeKind::kContractError) << other_body.detail;
  EXPECT_EQ(other_body.http_status, 422);
  EXPECT_EQ(other_body.retryability(), Retryability::kNever);

  HttpAcquirerClient stranger(io_.get_executor(), Config("sk_not_a_merchant"));
  const auto unauthorised = Await(stranger.Capture(Request("m1:k2", "ch_2"), NewRequestId()));
  EXPECT_EQ(unauthorised.kind, OutcomeKind::kContractError);
  EXPECT_EQ(unauthorised.http_status, 401);
  EXPECT_EQ(LedgerCaptureIds("m1:k").size(), 1u);
  EXPECT_TRUE(LedgerCaptureIds("m1:k2").empty());
}

TEST_F(AcquirerClientE2E, ThrottleIsTransientWithRetryAfterAndCapturesNothing) {
  SetFaults(R"({"throttle_rate": 1, "retry_after_s": 2})");
  const auto request = Request("m1:throttled", "ch_1");
  const auto outcome = Capture(request);
  EXPECT_EQ(outcome.kind, OutcomeKind::kThrottled) << outcome.detail;
  EXPECT_EQ(outcome.http_status, 429);
  EXPECT_EQ(outcome.retry_after, 2s);
  EXPECT_EQ(outcome.retryability(), Retryability::kTransient);
  EXPECT_TRUE(LedgerCaptureIds(request.idempotency_key).empty());
}

TEST_F(AcquirerClientE2E, ServiceUnavailableIsUnknownAndTransient) {
  SetFaults(R"({"error_rate": 1, "retry_after_s": 1})");
  const auto outcome = Capture(Request("m1:unavailable", "ch_1"));
  EXPECT_EQ(outcome.kind, OutcomeKind::kUnavailable) << outcome.detail;
  EXPECT_EQ(outcome.evidence(), EvidenceClass::kUnknown);
  EXPECT_EQ(outcome.retry_after, 1s);
  EXPECT_EQ(outcome.retryability(), Retryability::kTransient);
}

TEST_F(AcquirerClientE2E, DroppedConnectionIsUnknownAndTheCaptureIsFoundByKey) {
  SetFaults(R"({"drop_rate": 1})");
  const auto request = Request("m1:dropped", "ch_1");
  const auto outcome = Capture(request);
  EXPECT_EQ(outcome.kind, OutcomeKind::kConnectionDropped) << outcome.detail;
  EXPECT_EQ(outcome.evidence(), EvidenceClass::kUnknown);
  // The simulator captured before dropping: unknown was the honest answer, and the key finds it.
  const auto found = Lookup(LookupFor(request));
  ASSERT_EQ(found.kind, OutcomeKind::kCaptured) << found.detail;
  EXPECT_THAT(LedgerCaptureIds(request.idempotency_key), ::testing::ElementsAre(found.capture->id));
}

TEST_F(AcquirerClientE2E, TimedOutCaptureIsUnknownAndLaterFoundByKey) {
  SetFaults(R"({"timeout_rate": 1, "timeout_delay_ms": 20000})");
  client_ = std::make_unique<HttpAcquirerClient>(io_.get_executor(), [&] {
    auto c = Config();
    c.request_timeout = 500ms;
    return c;
  }());
  const auto request = Request("m1:timed-out", "ch_1");
  const auto outcome = Capture(request);
  EXPECT_EQ(outcome.kind, OutcomeKind::kTimedOut) << outcome.detail;
  EXPECT_EQ(outcome.transport, TransportStatus::kResponseTimedOut);
  EXPECT_EQ(outcome.evidence(), EvidenceClass::kUnknown);
  const auto found = Lookup(LookupFor(request));
  ASSERT_EQ(found.kind, OutcomeKind::kCaptured) << found.detail;
  EXPECT_EQ(found.capture->reference, "ch_1");
  EXPECT_THAT(LedgerCaptureIds(request.idempotency_key), ::testing::ElementsAre(found.capture->id));
}

TEST_F(AcquirerClientE2E, NotFoundBeforeACaptureIsVisibleIsNotProofOfAbsence) {
  SetFaults(R"({"visibility_delay_ms": 60000})");
  const auto request = Request("m1:invisible", "ch_1");
  ASSERT_EQ(Capture(request).kind, OutcomeKind::kCaptured);
  const auto lookup = Lookup(LookupFor(request));
  EXPECT_EQ(lookup.kind, OutcomeKind::kNotFound);
  EXPECT_EQ(lookup.evidence(), EvidenceClass::kUnknown);
  EXPECT_EQ(LedgerCaptureIds(request.idempotency_key).size(), 1u);
}

TEST_F(AcquirerClientE2E, SameKeyWhileTheFirstIsInFlightIsTransient) {
  SetFaults(R"({"latency": {"distribution": "fixed", "ms": 1500}})");
  const auto request = Request("m1:in-flight", "ch_1");
  auto first = asio::co_spawn(io_, client_->Capture(request, NewRequestId()), asio::use_future);
  ASSERT_TRUE(charge_outbox::testing::Eventually([&] { return InFlight() == 1; }));
  const auto second = Capture(request);
  EXPECT_EQ(second.kind, OutcomeKind::kInFlight) << second.detail;
  EXPECT_EQ(second.evidence(), EvidenceClass::kUnknown);
  EXPECT_EQ(second.retryability(), Retryability::kTransient);
  EXPECT_EQ(second.retry_after, 1s);
  ASSERT_EQ(first.wait_for(30s), std::future_status::ready);
  EXPECT_EQ(first.get().kind, OutcomeKind::kCaptured);
}

TEST_F(AcquirerClientE2E, FiftyConcurrentCapturesWithOneKeyMakeOneCapture) {
  // Latency keeps the first capture in flight while the others arrive: they get 409 and the policy
  // retries them (same key, Retry-After: 1) until the acquirer replays the one capture.
  SetFaults(R"({"latency": {"distribution": "fixed", "ms": 300}})");
  const RetryPolicy policy(RetryPolicyOptions{10, {100ms, 1s, retry::Jitter::kFull, 20s}},
                           std::make_shared<util::Mt19937RandomSource>());
  util::AsioClock clock;
  const auto request = Request("m1:fifty", "ch_50");
  std::vector<std::future<RetryRun>> runs;
  for (int i = 0; i < 50; ++i) {
    runs.push_back(asio::co_spawn(io_, CaptureWithRetries(*client_, request, policy, clock), asio::use_future));
  }
  std::set<std::string> capture_ids;
  std::size_t in_flight_answers = 0;
  for (auto& future : runs) {
    ASSERT_EQ(future.wait_for(60s), std::future_status::ready);
    const auto run = future.get();
    ASSERT_EQ(run.last().kind, OutcomeKind::kCaptured) << run.last().detail;
    EXPECT_EQ(run.evidence(), EvidenceClass::kApproved);
    capture_ids.insert(run.last().capture->id);
    for (const auto& attempt : run.attempts) {
      if (attempt.outcome.kind == OutcomeKind::kInFlight) ++in_flight_answers;
    }
  }
  EXPECT_EQ(capture_ids.size(), 1u);
  EXPECT_GT(in_flight_answers, 0u);  // the race really happened
  EXPECT_THAT(LedgerCaptureIds(request.idempotency_key), ::testing::ElementsAre(*capture_ids.begin()));
}

TEST_F(AcquirerClientE2E, ConnectRefusedWhileTheSimulatorIsDownThenTheLedgerSurvivesItsRestart) {
  const auto request = Request("m1:survives", "ch_1");
  const auto captured = Capture(request);
  ASSERT_EQ(captured.kind, OutcomeKind::kCaptured) << captured.detail;

  sim_->process().Signal(SIGKILL);
  sim_->process().Wait(10s);
  const auto refused = Capture(Request("m1:while-down", "ch_2"));
  EXPECT_EQ(refused.kind, OutcomeKind::kNotSent) << refused.detail;
  EXPECT_EQ(refused.evidence(), EvidenceClass::kNotSent);
  // The pooled connection to the dead process is found closed, then the connect is refused.
  EXPECT_EQ(refused.transport, TransportStatus::kConnectRefused);

  StartSim();  // same data directory, a new port
  const auto found = Lookup(LookupFor(request));
  ASSERT_EQ(found.kind, OutcomeKind::kCaptured) << found.detail;
  EXPECT_EQ(found.capture->id, captured.capture->id);
  const auto replayed = Capture(request);
  EXPECT_EQ(replayed.kind, OutcomeKind::kCaptured);
  EXPECT_EQ(replayed.capture->id, captured.capture->id);
  EXPECT_THAT(LedgerCaptureIds(request.idempotency_key), ::testing::ElementsAre(captured.capture->id));
}

TEST_F(AcquirerClientE2E, ListByWindowFollowsEveryPage) {
  const auto from = std::chrono::system_clock::now() - 1min;
  std::set<std::string> made;
  for (int i = 0; i < 5; ++i) {
    const auto outcome = Capture(Request("m1:list-" + std::to_string(i), "ch_l" + std::to_string(i)));
    ASSERT_EQ(outcome.kind, OutcomeKind::kCaptured);
    made.insert(outcome.capture->id);
  }
  const RetryPolicy policy(RetryPolicyOptions{3, {50ms, 200ms, retry::Jitter::kFull, 5s}},
                           std::make_shared<util::Mt19937RandomSource>());
  util::AsioClock clock;
  ListWindow window{from, std::chrono::system_clock::now() + 1min, 2};
  const auto listed = Await(ListByWindow(*client_, window, policy, clock));
  EXPECT_EQ(listed.end, ListEnd::kComplete);
  EXPECT_EQ(listed.pages, 3);
  std::set<std::string> seen;
  for (const auto& capture : listed.captures) seen.insert(capture.id);
  EXPECT_EQ(seen, made);
  EXPECT_EQ(listed.captures.size(), 5u);
}

TEST_F(AcquirerClientE2E, VoidThenLookupShowsTheVoid) {
  const auto request = Request("m1:capture-to-void", "ch_1");
  const auto captured = Capture(request);
  ASSERT_EQ(captured.kind, OutcomeKind::kCaptured);
  const VoidRequest void_request{captured.capture->id, "m1:capture-to-void"};  // void keys: their own namespace
  const auto voided = Await(client_->Void(void_request, NewRequestId()));
  EXPECT_EQ(voided.kind, OutcomeKind::kVoided) << voided.detail;
  EXPECT_EQ(voided.evidence(), EvidenceClass::kApproved);
  EXPECT_EQ(Await(client_->Void(void_request, NewRequestId())).kind, OutcomeKind::kVoided);  // replay
  const auto found = Lookup(LookupFor(request));
  ASSERT_EQ(found.kind, OutcomeKind::kCaptured);
  EXPECT_EQ(found.capture->status, CaptureStatus::kVoided);
  const auto unknown_id = Await(client_->Void(VoidRequest{"cap_does_not_exist", "v2"}, NewRequestId()));
  EXPECT_EQ(unknown_id.kind, OutcomeKind::kContractError);
  EXPECT_EQ(unknown_id.http_status, 404);
}

}  // namespace
}  // namespace charge_outbox::acquirer
