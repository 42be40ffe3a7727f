// acquirer-sim run as the local stack runs it: the real binary, an ephemeral port, its own data
// directory, driven over HTTP. Every test starts its own simulator.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <future>
#include <latch>
#include <regex>
#include <set>
#include <thread>

#include "sim_process.hpp"

namespace charge_outbox::testing {
namespace {

namespace fs = std::filesystem;
namespace bhttp = boost::beast::http;
using namespace std::chrono_literals;
using ::testing::HasSubstr;

std::string CaptureBody(const std::string& reference, std::int64_t amount = 25000,
                        const std::string& payment_method = "pm_tok_visa") {
  return R"({"amount": )" + std::to_string(amount) + R"(, "currency": "BRL", "reference": ")" + reference +
         R"(", "payment_method": ")" + payment_method + R"("})";
}

class AcquirerSimE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / UniqueName("acquirer_sim_e2e");
    sim_ = std::make_unique<Sim>(dir_ / "data");
    client_ = std::make_unique<HttpTestClient>(sim_->port());
  }
  void TearDown() override {
    ExpectStillRunning(*sim_);
    client_.reset();
    sim_.reset();
    fs::remove_all(dir_);
  }

  HttpResult Capture(const std::string& key, const std::string& body, const char* api_key = kKeyA) {
    return client_->Post("/v1/captures", body, Auth(api_key, key));
  }
  HttpResult Lookup(const std::string& key, const char* api_key = kKeyA) {
    return client_->Get("/v1/captures?idempotency_key=" + key, Auth(api_key));
  }
  void SetFaults(const std::string& profile) {
    const auto r = client_->Put("/admin/faults", profile);
    ASSERT_EQ(r.status(), 200u) << r.response.body();
  }
  boost::json::array Ledger() {
    const auto r = client_->Get("/admin/ledger");
    EXPECT_EQ(r.status(), 200u);
    return r.json().at("entries").as_array();
  }
  // Captures begun and waiting out their latency, as GET /admin/stats reports them.
  std::int64_t InFlight() { return client_->Get("/admin/stats").json().at("in_flight").as_int64(); }
  void Restart() {
    client_.reset();
    sim_ = std::make_unique<Sim>(dir_ / "data");
    client_ = std::make_unique<HttpTestClient>(sim_->port());
  }

  fs::path dir_;
  std::unique_ptr<Sim> sim_;
  std::unique_ptr<HttpTestClient> client_;
};

TEST_F(AcquirerSimE2E, HealthzAnswersWithoutCredentials) {
  const auto r = client_->Get("/healthz");
  EXPECT_EQ(r.status(), 200u);
  EXPECT_EQ(r.json().at("status").as_string(), "ok");
}

TEST_F(AcquirerSimE2E, CaptureThenTheSameRequestReplaysTheSameResponse) {
  const auto first = Capture("k1", CaptureBody("ch_1"));
  ASSERT_EQ(first.status(), 201u) << first.response.body();
  const auto capture = first.json().as_object();
  EXPECT_THAT(std::string(capture.at("id").as_string()), ::testing::StartsWith("cap_"));
  EXPECT_EQ(capture.at("status").as_string(), "captured");
  EXPECT_EQ(capture.at("amount").as_int64(), 25000);
  EXPECT_EQ(capture.at("currency").as_string(), "BRL");
  EXPECT_EQ(capture.at("reference").as_string(), "ch_1");
  EXPECT_TRUE(capture.contains("created_at"));
  EXPECT_EQ(first.header("Location"), "/v1/captures/" + std::string(capture.at("id").as_string()));
  EXPECT_EQ(first.header("Idempotent-Replayed"), "");

  const auto again = Capture("k1", CaptureBody("ch_1"));
  ASSERT_EQ(again.status(), 201u);
  EXPECT_EQ(again.response.body(), first.response.body());
  EXPECT_EQ(again.header("Idempotent-Replayed"), "true");

  const auto ledger = Ledger();
  ASSERT_EQ(ledger.size(), 1u);
  const auto& entry = ledger[0].as_object();
  EXPECT_EQ(entry.at("type").as_string(), "capture");
  EXPECT_EQ(entry.at("id"), capture.at("id"));
  EXPECT_EQ(entry.at("idempotency_key").as_string(), "k1");
  EXPECT_EQ(entry.at("reference").as_string(), "ch_1");
  EXPECT_EQ(entry.at("amount").as_int64(), 25000);
  EXPECT_EQ(entry.at("currency").as_string(), "BRL");
  EXPECT_EQ(entry.at("created_at"), capture.at("created_at"));
}

TEST_F(AcquirerSimE2E, SameKeyOtherBodyIs422AndCapturesNothing) {
  ASSERT_EQ(Capture("k1", CaptureBody("ch_1")).status(), 201u);
  const auto r = Capture("k1", CaptureBody("ch_1", 25001));
  EXPECT_EQ(r.status(), 422u);
  EXPECT_EQ(r.header("Content-Type"), "application/problem+json");
  EXPECT_EQ(r.json().at("status").to_number<int>(), 422);
  EXPECT_EQ(Ledger().size(), 1u);
}

TEST_F(AcquirerSimE2E, SameKeyWhileTheFirstIsInFlightIs409) {
  SetFaults(R"({"latency": {"distribution": "fixed", "ms": 1500}})");
  auto first = std::async(std::launch::async, [this] {
    auto client = sim_->Client();
    return client.Post("/v1/captures", CaptureBody("ch_1"), Auth(kKeyA, "k1"));
  });
  ASSERT_TRUE(Eventually([&] { return InFlight() == 1; }));
  const auto second = Capture("k1", CaptureBody("ch_1"));
  EXPECT_EQ(second.status(), 409u);
  EXPECT_EQ(second.header("Retry-After"), "1");
  EXPECT_EQ(second.header("Content-Type"), "application/problem+json");
  EXPECT_EQ(Capture("k1", CaptureBody("ch_1", 7)).status(), 422u);  // other body, even in flight
  const auto first_result = first.get();
  EXPECT_EQ(first_result.status(), 201u);
  EXPECT_EQ(InFlight(), 0);
  EXPECT_EQ(Capture("k1", CaptureBody("ch_1")).header("Idempotent-Replayed"), "true");
  EXPECT_EQ(Ledger().size(), 1u);
}

TEST_F(AcquirerSimE2E, CredentialsAreRequiredAndScopeTheKeys) {
  const auto none = client_->Post("/v1/captures", CaptureBody("ch_1"), {{"Idempotency-Key", "k1"}});
  EXPECT_EQ(none.status(), 401u);
  EXPECT_EQ(none.header("WWW-Authenticate"), "Bearer");
  EXPECT_EQ(none.header("Content-Type"), "application/problem+json");
  EXPECT_EQ(Capture("k1", CaptureBody("ch_1"), "key_unknown").status(), 401u);
  EXPECT_EQ(client_->Get("/v1/captures?idempotency_key=k1", {{"Authorization", "Basic a2V5X2E6"}}).status(), 401u);

  const auto a = Capture("shared", CaptureBody("ch_a"), kKeyA);
  const auto b = Capture("shared", CaptureBody("ch_b", 1), kKeyB);
  ASSERT_EQ(a.status(), 201u);
  ASSERT_EQ(b.status(), 201u);  // another merchant's key: not a 422
  EXPECT_NE(a.json().at("id"), b.json().at("id"));
  EXPECT_EQ(Lookup("shared", kKeyB).json().at("reference").as_string(), "ch_b");
  const std::string id_a(a.json().at("id").as_string());
  EXPECT_EQ(client_->Get("/v1/captures/" + id_a, Auth(kKeyB)).status(), 404u);
  EXPECT_EQ(client_->Get("/v1/captures/" + id_a, Auth(kKeyA)).status(), 200u);
  const auto ledger = Ledger();
  ASSERT_EQ(ledger.size(), 2u);
  EXPECT_NE(ledger[0].at("merchant"), ledger[1].at("merchant"));
}

TEST_F(AcquirerSimE2E, InvalidRequestsAre400NamingTheField) {
  const auto no_key = client_->Post("/v1/captures", CaptureBody("ch_1"), Auth(kKeyA));
  EXPECT_EQ(no_key.status(), 400u);
  EXPECT_EQ(no_key.json().at("field").as_string(), "Idempotency-Key");
  const auto bad_currency = Capture("k1", R"({"amount": 1, "currency": "brl", "reference": "r", "payment_method": "p"})");
  EXPECT_EQ(bad_currency.status(), 400u);
  EXPECT_EQ(bad_currency.json().at("field").as_string(), "currency");
  const auto unknown = Capture("k1", R"({"amount": 1, "currency": "BRL", "reference": "r", "payment_method": "p", "x": 1})");
  EXPECT_EQ(unknown.json().at("field").as_string(), "x");
  EXPECT_EQ(Capture("k1", std::string(20 * 1024, ' ')).status(), 413u);
  EXPECT_EQ(client_->Send(bhttp::verb::delete_, "/v1/captures", {}, Auth(kKeyA)).status(), 405u);
  EXPECT_EQ(client_->Get("/v2/anything", Auth(kKeyA)).status(), 404u);
  EXPECT_TRUE(Ledger().empty());
}

TEST_F(AcquirerSimE2E, DeterministicDeclinesAreReplayedAndAreNotInTheLedger) {
  const auto declined = Capture("d1", CaptureBody("ch_d", 100, "pm_tok_declined"));
  ASSERT_EQ(declined.status(), 402u);
  EXPECT_EQ(declined.json().at("status").as_string(), "declined");
  EXPECT_EQ(declined.json().at("decline_code").as_string(), "card_declined");
  const auto again = Capture("d1", CaptureBody("ch_d", 100, "pm_tok_declined"));
  EXPECT_EQ(again.status(), 402u);
  EXPECT_EQ(again.response.body(), declined.response.body());
  EXPECT_EQ(again.header("Idempotent-Replayed"), "true");
  const auto insufficient = Capture("d2", CaptureBody("ch_i", 100, "pm_tok_insufficient"));
  EXPECT_EQ(insufficient.status(), 402u);
  EXPECT_EQ(insufficient.json().at("decline_code").as_string(), "insufficient_funds");
  EXPECT_EQ(Lookup("d1").status(), 404u);
  EXPECT_TRUE(Ledger().empty());
}

TEST_F(AcquirerSimE2E, DeclineRateDeclinesWithTheConfiguredCode) {
  SetFaults(R"({"decline_rate": 1, "decline_code": "do_not_honor"})");
  const auto r = Capture("k1", CaptureBody("ch_1"));
  EXPECT_EQ(r.status(), 402u);
  EXPECT_EQ(r.json().at("decline_code").as_string(), "do_not_honor");
  EXPECT_TRUE(Ledger().empty());
}

TEST_F(AcquirerSimE2E, ThrottleAnswers429WithRetryAfterAndLeavesTheKeyUnused) {
  SetFaults(R"({"throttle_rate": 1, "retry_after_s": 2})");
  const auto r = Capture("k1", CaptureBody("ch_1"));
  EXPECT_EQ(r.status(), 429u);
  EXPECT_EQ(r.header("Retry-After"), "2");
  EXPECT_EQ(r.header("Content-Type"), "application/problem+json");
  EXPECT_TRUE(Ledger().empty());
  SetFaults("{}");
  EXPECT_EQ(Capture("k1", CaptureBody("ch_1")).status(), 201u);
  EXPECT_EQ(Ledger().size(), 1u);
}

TEST_F(AcquirerSimE2E, ErrorAnswers503WithRetryAfterAndCapturesNothing) {
  SetFaults(R"({"error_rate": 1})");
  const auto r = Capture("k1", CaptureBody("ch_1"));
  EXPECT_EQ(r.status(), 503u);
  EXPECT_EQ(r.header("Retry-After"), "1");
  EXPECT_TRUE(Ledger().empty());
  EXPECT_EQ(Lookup("k1").status(), 404u);
}

TEST_F(AcquirerSimE2E, TimeoutCapturesThenAnswersLaterThanTheClientWaits) {
  SetFaults(R"({"timeout_rate": 1, "timeout_delay_ms": 5000})");
  auto impatient = sim_->Client(500ms);
  const auto started = std::chrono::steady_clock::now();
  const auto r = impatient.Post("/v1/captures", CaptureBody("ch_1"), Auth(kKeyA, "k1"));
  EXPECT_EQ(r.error, boost::beast::error::timeout) << r.error.message();
  EXPECT_LT(std::chrono::steady_clock::now() - started, 4s);
  // Captured all the same: the client's "unknown" is resolved by a lookup.
  const auto found = Lookup("k1");
  ASSERT_EQ(found.status(), 200u);
  EXPECT_EQ(found.json().at("status").as_string(), "captured");
  EXPECT_EQ(Ledger().size(), 1u);
}

TEST_F(AcquirerSimE2E, TimeoutAnswerArrivesAfterTheDelay) {
  SetFaults(R"({"timeout_rate": 1, "timeout_delay_ms": 400})");
  const auto started = std::chrono::steady_clock::now();
  const auto r = Capture("k1", CaptureBody("ch_1"));
  EXPECT_EQ(r.status(), 201u);
  EXPECT_GE(std::chrono::steady_clock::now() - started, 400ms);
}

TEST_F(AcquirerSimE2E, DropCapturesThenClosesWithoutAnswering) {
  SetFaults(R"({"drop_rate": 1})");
  const auto r = Capture("k1", CaptureBody("ch_1"));
  EXPECT_EQ(r.error, bhttp::error::end_of_stream) << r.error.message();
  const auto found = Lookup("k1");  // lookups are not in apply_to: unaffected
  ASSERT_EQ(found.status(), 200u);
  EXPECT_EQ(found.json().at("reference").as_string(), "ch_1");
  EXPECT_EQ(Ledger().size(), 1u);
}

TEST_F(AcquirerSimE2E, LatencyDelaysTheAnswer) {
  SetFaults(R"({"latency": {"distribution": "fixed", "ms": 300}})");
  const auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(Capture("k1", CaptureBody("ch_1")).status(), 201u);
  EXPECT_GE(std::chrono::steady_clock::now() - started, 300ms);
}

TEST_F(AcquirerSimE2E, FaultsReachLookupsOnlyWhenListedInApplyTo) {
  SetFaults(R"({"error_rate": 1, "apply_to": ["lookup", "list"]})");
  EXPECT_EQ(Capture("k1", CaptureBody("ch_1")).status(), 201u);
  const auto lookup = Lookup("k1");
  EXPECT_EQ(lookup.status(), 503u);
  EXPECT_EQ(lookup.header("Retry-After"), "1");
  EXPECT_EQ(client_->Get("/v1/captures?limit=5", Auth(kKeyA)).status(), 503u);
}

// A replay of a finished key is an operation of its own: left out of apply_to it answers at once, named
// there it can fail, stall or go silent like any other call of an acquirer in trouble.
TEST_F(AcquirerSimE2E, FaultsReachReplaysOnlyWhenListedInApplyTo) {
  ASSERT_EQ(Capture("k1", CaptureBody("ch_1")).status(), 201u);
  SetFaults(R"({"timeout_rate": 1, "timeout_delay_ms": 3000})");
  client_->set_timeout(1s);
  EXPECT_EQ(Capture("k1", CaptureBody("ch_1")).status(), 201u);  // new captures only: the replay answers at once
  client_->set_timeout(10s);

  SetFaults(R"({"error_rate": 1, "apply_to": ["replay"]})");
  const auto failing = Capture("k1", CaptureBody("ch_1"));
  EXPECT_EQ(failing.status(), 503u);
  EXPECT_EQ(failing.header("Retry-After"), "1");
  EXPECT_EQ(Capture("k2", CaptureBody("ch_2")).status(), 201u);  // a new capture is not a replay

  SetFaults(R"({"drop_rate": 1, "apply_to": ["replay"]})");
  EXPECT_EQ(Capture("k1", CaptureBody("ch_1")).error, bhttp::error::end_of_stream);

  SetFaults(R"({"timeout_rate": 1, "timeout_delay_ms": 3000, "apply_to": ["replay"]})");
  client_->set_timeout(500ms);
  EXPECT_EQ(Capture("k1", CaptureBody("ch_1")).error, boost::beast::error::timeout);
  client_->set_timeout(10s);
  EXPECT_EQ(Ledger().size(), 2u);  // replays never capture again
}

TEST_F(AcquirerSimE2E, VisibilityDelayHidesACaptureFromLookupAndListForAWhile) {
  SetFaults(R"({"visibility_delay_ms": 1500})");
  const auto created = Capture("k1", CaptureBody("ch_1"));
  ASSERT_EQ(created.status(), 201u);
  const auto answered = std::chrono::steady_clock::now();
  EXPECT_EQ(Lookup("k1").status(), 404u);
  EXPECT_TRUE(client_->Get("/v1/captures", Auth(kKeyA)).json().at("data").as_array().empty());
  EXPECT_EQ(Capture("k1", CaptureBody("ch_1")).header("Idempotent-Replayed"), "true");  // replay is not delayed
  ASSERT_TRUE(Eventually([&] { return Lookup("k1").status() == 200u; }));
  EXPECT_GE(std::chrono::steady_clock::now() - answered, 1400ms);
  EXPECT_EQ(client_->Get("/v1/captures", Auth(kKeyA)).json().at("data").as_array().size(), 1u);
}

TEST_F(AcquirerSimE2E, ListPagesThroughATimeWindowInCreationOrder) {
  std::vector<boost::json::value> created;
  for (int i = 0; i < 7; ++i) {
    const auto r = Capture("k" + std::to_string(i), CaptureBody("ch_" + std::to_string(i)));
    ASSERT_EQ(r.status(), 201u);
    created.push_back(r.json());
  }
  ASSERT_EQ(Capture("other", CaptureBody("ch_b"), kKeyB).status(), 201u);

  std::vector<std::string> seen;
  std::string target = "/v1/captures?limit=3";
  int pages = 0;
  for (;;) {
    const auto r = client_->Get(target, Auth(kKeyA));
    ASSERT_EQ(r.status(), 200u) << r.response.body();
    const auto body = r.json().as_object();
    for (const auto& c : body.at("data").as_array()) seen.emplace_back(c.at("id").as_string());
    ++pages;
    if (body.at("next_page_token").is_null()) break;
    target = "/v1/captures?limit=3&page_token=" + std::string(body.at("next_page_token").as_string());
    ASSERT_LT(pages, 10);
  }
  EXPECT_EQ(pages, 3);
  ASSERT_EQ(seen.size(), 7u);
  for (std::size_t i = 0; i < 7; ++i) EXPECT_EQ(seen[i], created[i].at("id").as_string());

  // created_from inclusive, created_to exclusive.
  const std::string from(created[2].at("created_at").as_string());
  const std::string to(created[5].at("created_at").as_string());
  const auto window = client_->Get("/v1/captures?created_from=" + from + "&created_to=" + to, Auth(kKeyA));
  ASSERT_EQ(window.status(), 200u) << window.response.body();
  const auto data = window.json().at("data").as_array();
  ASSERT_EQ(data.size(), 3u);
  EXPECT_EQ(data[0].at("id"), created[2].at("id"));
  EXPECT_EQ(data[2].at("id"), created[4].at("id"));
  EXPECT_TRUE(window.json().at("next_page_token").is_null());

  // A numeric offset, '+' sent as is: the same instant as the Z form.
  const auto offset = client_->Get("/v1/captures?created_from=2000-01-01T03:00:00+03:00&limit=1", Auth(kKeyA));
  ASSERT_EQ(offset.status(), 200u) << offset.response.body();
  EXPECT_EQ(offset.json().at("data").at(0).at("id"), created[0].at("id"));

  const auto bad_time = client_->Get("/v1/captures?created_from=yesterday", Auth(kKeyA));
  EXPECT_EQ(bad_time.status(), 400u);
  EXPECT_EQ(bad_time.json().at("field").as_string(), "created_from");
  EXPECT_EQ(client_->Get("/v1/captures?page_token=forged", Auth(kKeyA)).json().at("field").as_string(), "page_token");
  EXPECT_EQ(client_->Get("/v1/captures?limit=0", Auth(kKeyA)).json().at("field").as_string(), "limit");
  EXPECT_EQ(client_->Get("/v1/captures?colour=red", Auth(kKeyA)).json().at("field").as_string(), "colour");
}

TEST_F(AcquirerSimE2E, VoidIsIdempotentAndRecordedInTheLedger) {
  const auto created = Capture("k1", CaptureBody("ch_1"));
  ASSERT_EQ(created.status(), 201u);
  const std::string id(created.json().at("id").as_string());
  const auto path = "/v1/captures/" + id + "/void";
  const auto voided = client_->Post(path, "", Auth(kKeyA, "v1"));
  ASSERT_EQ(voided.status(), 200u) << voided.response.body();
  EXPECT_EQ(voided.json().at("status").as_string(), "voided");
  const auto again = client_->Post(path, "", Auth(kKeyA, "v1"));
  EXPECT_EQ(again.status(), 200u);
  EXPECT_EQ(again.json().at("status").as_string(), "voided");
  const auto found = Lookup("k1");
  EXPECT_EQ(found.json().at("status").as_string(), "voided");
  EXPECT_TRUE(found.json().as_object().contains("voided_at"));

  const auto other = Capture("k2", CaptureBody("ch_2"));
  const std::string other_id(other.json().at("id").as_string());
  EXPECT_EQ(client_->Post("/v1/captures/" + other_id + "/void", "", Auth(kKeyA, "v1")).status(), 422u);
  EXPECT_EQ(client_->Post("/v1/captures/cap_nonexistent/void", "", Auth(kKeyA, "v9")).status(), 404u);
  EXPECT_EQ(client_->Post(path, "", Auth(kKeyA)).status(), 400u);
  EXPECT_EQ(client_->Post(path, "", Auth(kKeyB, "v1")).status(), 404u);  // not that merchant's capture

  const auto ledger = Ledger();  // in the order things happened: capture k1, its void, capture k2
  ASSERT_EQ(ledger.size(), 3u);
  EXPECT_EQ(ledger[0].at("type").as_string(), "capture");
  EXPECT_EQ(ledger[1].at("type").as_string(), "void");
  EXPECT_EQ(ledger[1].at("id").as_string(), id);
  EXPECT_EQ(ledger[1].at("idempotency_key").as_string(), "v1");
  EXPECT_EQ(ledger[1].at("reference").as_string(), "ch_1");
  EXPECT_EQ(ledger[1].at("amount").as_int64(), 25000);
  EXPECT_EQ(ledger[2].at("type").as_string(), "capture");
  EXPECT_EQ(ledger[2].at("id").as_string(), other_id);
}

TEST_F(AcquirerSimE2E, FaultProfileIsReadBackAndInvalidOnesAreRefusedNamingTheField) {
  SetFaults(R"({"seed": 3, "drop_rate": 0.5, "latency": {"distribution": "uniform", "min_ms": 1, "max_ms": 4}})");
  const auto current = client_->Get("/admin/faults");
  ASSERT_EQ(current.status(), 200u);
  EXPECT_EQ(current.json().at("seed").as_int64(), 3);
  EXPECT_EQ(current.json().at("drop_rate").as_double(), 0.5);
  EXPECT_EQ(current.json().at("latency").at("max_ms").as_int64(), 4);

  const auto bad = client_->Put("/admin/faults", R"({"timeout_rate": 2})");
  EXPECT_EQ(bad.status(), 400u);
  EXPECT_EQ(bad.header("Content-Type"), "application/problem+json");
  EXPECT_EQ(bad.json().at("field").as_string(), "timeout_rate");
  const auto nested = client_->Put("/admin/faults", R"({"latency": {"distribution": "fixed", "ms": -1}})");
  EXPECT_EQ(nested.json().at("field").as_string(), "latency.ms");
  EXPECT_EQ(client_->Get("/admin/faults").response.body(), current.response.body());  // unchanged
}

TEST_F(AcquirerSimE2E, TheSameSeedGivesTheSameFaults) {
  const auto run = [&](const std::string& prefix) {
    SetFaults(R"({"seed": 42, "decline_rate": 0.5})");
    std::string pattern;
    for (int i = 0; i < 24; ++i) {
      pattern += Capture(prefix + std::to_string(i), CaptureBody(prefix)).status() == 201u ? 'C' : 'D';
    }
    return pattern;
  };
  const auto first = run("a");
  EXPECT_EQ(run("b"), first);
  EXPECT_NE(first.find('C'), std::string::npos);
  EXPECT_NE(first.find('D'), std::string::npos);
}

TEST_F(AcquirerSimE2E, ResetForgetsEverythingAndRestoresTheStartUpProfile) {
  const auto initial = client_->Get("/admin/faults").response.body();
  ASSERT_EQ(Capture("k1", CaptureBody("ch_1")).status(), 201u);
  SetFaults(R"({"error_rate": 0.5})");
  const auto r = client_->Post("/admin/reset", "");
  EXPECT_EQ(r.status(), 200u);
  EXPECT_TRUE(Ledger().empty());
  EXPECT_EQ(Lookup("k1").status(), 404u);
  EXPECT_EQ(client_->Get("/admin/faults").response.body(), initial);
  EXPECT_EQ(fs::file_size(dir_ / "data" / "captures.jsonl"), 0u);
  EXPECT_EQ(Capture("k1", CaptureBody("another body")).status(), 201u);  // the key is free again
}

TEST_F(AcquirerSimE2E, SigkillThenRestartKeepsTheLedgerAndTheIdempotencyKeys) {
  const auto created = Capture("k1", CaptureBody("ch_1"));
  ASSERT_EQ(created.status(), 201u);
  ASSERT_EQ(Capture("k2", CaptureBody("ch_2")).status(), 201u);
  ASSERT_EQ(Capture("d1", CaptureBody("ch_d", 5, "pm_tok_declined")).status(), 402u);
  const std::string id(created.json().at("id").as_string());
  ASSERT_EQ(client_->Post("/v1/captures/" + id + "/void", "", Auth(kKeyA, "v1")).status(), 200u);
  // The seeds' bad case: the acquirer captures, the client never hears back, then the acquirer dies.
  SetFaults(R"({"timeout_rate": 1, "timeout_delay_ms": 60000})");
  auto impatient = sim_->Client(300ms);
  EXPECT_EQ(impatient.Post("/v1/captures", CaptureBody("ch_3"), Auth(kKeyA, "k3")).error, boost::beast::error::timeout);
  const auto before = client_->Get("/admin/ledger").response.body();

  sim_->process().Signal(SIGKILL);
  EXPECT_EQ(sim_->process().Wait(10s).term_signal, SIGKILL);
  Restart();
  EXPECT_THAT(sim_->startup_output(), HasSubstr("5 record(s) replayed"));

  EXPECT_EQ(client_->Get("/admin/ledger").response.body(), before);
  const auto replay = Capture("k1", CaptureBody("ch_1"));
  EXPECT_EQ(replay.status(), 201u);
  EXPECT_EQ(replay.json().at("id").as_string(), id);
  EXPECT_EQ(replay.header("Idempotent-Replayed"), "true");
  EXPECT_EQ(Capture("d1", CaptureBody("ch_d", 5, "pm_tok_declined")).status(), 402u);
  EXPECT_EQ(Capture("k2", CaptureBody("ch_2", 3)).status(), 422u);
  const auto timed_out = Lookup("k3");
  ASSERT_EQ(timed_out.status(), 200u);
  EXPECT_EQ(timed_out.json().at("reference").as_string(), "ch_3");
  EXPECT_EQ(Lookup("k1").json().at("status").as_string(), "voided");
}

// Fires `n` captures with one key at once, each on its own connection (opened beforehand).
std::vector<HttpResult> Stampede(const Sim& sim, int n, const std::string& key) {
  std::latch ready(n);
  std::vector<std::future<HttpResult>> futures;
  for (int i = 0; i < n; ++i) {
    futures.push_back(std::async(std::launch::async, [&] {
      auto client = sim.Client();
      client.Get("/healthz");  // connect first, so the captures race each other rather than the connects
      ready.arrive_and_wait();
      return client.Post("/v1/captures", CaptureBody("ch_race"), Auth(kKeyA, key));
    }));
  }
  std::vector<HttpResult> results;
  for (auto& f : futures) results.push_back(f.get());
  return results;
}

TEST_F(AcquirerSimE2E, FiftyConcurrentCapturesWithOneKeyMakeOneLedgerEntry) {
  const auto results = Stampede(*sim_, 50, "race");
  std::set<std::string> ids;
  int originals = 0;
  for (const auto& r : results) {
    ASSERT_TRUE(r.ok()) << r.error.message();
    ASSERT_TRUE(r.status() == 201u || r.status() == 409u) << r.status() << " " << r.response.body();
    if (r.status() == 201u) {
      ids.insert(std::string(r.json().at("id").as_string()));
      if (r.header("Idempotent-Replayed").empty()) ++originals;
    }
  }
  EXPECT_EQ(ids.size(), 1u);
  EXPECT_EQ(originals, 1);
  EXPECT_EQ(Ledger().size(), 1u);
}

TEST_F(AcquirerSimE2E, FiftyConcurrentCapturesDuringLatencyGetOne201And409s) {
  // Long enough that all 50, released together, arrive while the first waits out its latency.
  SetFaults(R"({"latency": {"distribution": "fixed", "ms": 2000}})");
  const auto results = Stampede(*sim_, 50, "race");
  int created = 0;
  int conflicts = 0;
  for (const auto& r : results) {
    ASSERT_TRUE(r.ok()) << r.error.message();
    if (r.status() == 201u) ++created;
    if (r.status() == 409u) ++conflicts;
  }
  EXPECT_EQ(created, 1);
  EXPECT_EQ(conflicts, 49);
  EXPECT_EQ(Ledger().size(), 1u);
}

TEST_F(AcquirerSimE2E, SigtermLetsAnInFlightCaptureFinishThenExitsZero) {
  SetFaults(R"({"latency": {"distribution": "fixed", "ms": 800}})");
  auto in_flight = std::async(std::launch::async, [this] {
    auto client = sim_->Client();
    return client.Post("/v1/captures", CaptureBody("ch_1"), Auth(kKeyA, "k1"));
  });
  ASSERT_TRUE(Eventually([&] { return InFlight() == 1; }));
  sim_->process().Signal(SIGTERM);
  const auto r = in_flight.get();
  ASSERT_TRUE(r.ok()) << r.error.message();
  EXPECT_EQ(r.status(), 201u);
  EXPECT_FALSE(r.response.keep_alive());
  const auto exit = sim_->process().Wait(10s);
  EXPECT_EQ(exit.exit_code, 0) << exit.out << exit.err;
  EXPECT_THAT(exit.out, HasSubstr("received SIGTERM"));
  EXPECT_THAT(exit.out, HasSubstr("\"msg\":\"stopped\""));
  Restart();
  EXPECT_EQ(Lookup("k1").status(), 200u);
}

TEST_F(AcquirerSimE2E, StartUpFaultProfileComesFromConfig) {
  Sim configured(dir_ / "other", {{"FAULTS_DECLINE_RATE", "1"}, {"FAULTS_DECLINE_CODE", "expired_card"},
                                  {"FAULTS_SEED", "77"}});
  auto client = configured.Client();
  const auto faults = client.Get("/admin/faults").json();
  EXPECT_EQ(faults.at("seed").as_int64(), 77);
  const auto r = client.Post("/v1/captures", CaptureBody("ch_1"), Auth(kKeyA, "k1"));
  EXPECT_EQ(r.status(), 402u);
  EXPECT_EQ(r.json().at("decline_code").as_string(), "expired_card");
}

TEST_F(AcquirerSimE2E, ASecondSimulatorOnTheSameDataDirectoryRefusesToStart) {
  const auto r = RunProcess({ACQUIRER_SIM_BIN}, {{"HTTP_PORT", "0"},
                                                 {"DATA_DIR", (dir_ / "data").string()},
                                                 {"AUTH_API_KEYS", kKeyA}});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr("in use by another acquirer-sim"));
}

TEST(AcquirerSimConfigE2E, BadConfigurationExitsTwoNamingTheKey) {
  const auto dir = fs::temp_directory_path() / UniqueName("acquirer_sim_cfg");
  const EnvChanges base{{"HTTP_PORT", "0"}, {"DATA_DIR", dir.string()}, {"AUTH_API_KEYS", kKeyA}};
  auto with = [&](std::string name, std::optional<std::string> value) {
    auto env = base;
    env[std::move(name)] = std::move(value);
    return env;
  };
  const auto rate = RunProcess({ACQUIRER_SIM_BIN}, with("FAULTS_TIMEOUT_RATE", "2"));
  EXPECT_EQ(rate.exit_code, 2);
  EXPECT_THAT(rate.err, HasSubstr("faults.timeout_rate"));
  const auto keys = RunProcess({ACQUIRER_SIM_BIN}, with("AUTH_API_KEYS", std::nullopt));
  EXPECT_EQ(keys.exit_code, 2);
  EXPECT_THAT(keys.err, HasSubstr("auth.api_keys"));
  const auto latency = RunProcess({ACQUIRER_SIM_BIN}, with("FAULTS_LATENCY_DISTRIBUTION", "gaussian"));
  EXPECT_EQ(latency.exit_code, 2);
  EXPECT_THAT(latency.err, HasSubstr("faults.latency.distribution"));
  const auto argv = RunProcess({ACQUIRER_SIM_BIN, "--verbose"}, base);
  EXPECT_EQ(argv.exit_code, 2);
  EXPECT_THAT(argv.err, HasSubstr("usage: acquirer-sim"));
  fs::remove_all(dir);
}

// server.* was the simulator's own spelling of http.*: a deployment that still sets it must fail at
// start, told the new name, rather than run on the default port.
TEST(AcquirerSimConfigE2E, AnOldServerKeyExitsTwoNamingItsNewName) {
  const auto dir = fs::temp_directory_path() / UniqueName("acquirer_sim_cfg");
  const auto from_env = RunProcess({ACQUIRER_SIM_BIN}, {{"SERVER_PORT", "0"},
                                                        {"DATA_DIR", dir.string()},
                                                        {"AUTH_API_KEYS", kKeyA}});
  EXPECT_EQ(from_env.exit_code, 2);
  EXPECT_THAT(from_env.err, HasSubstr("server.port"));
  EXPECT_THAT(from_env.err, HasSubstr("http.port"));
  EXPECT_THAT(from_env.err, HasSubstr("HTTP_PORT"));

  fs::create_directories(dir);
  const auto config_file = dir / "acquirer-sim.yaml";
  std::ofstream(config_file) << "server:\n  address: 127.0.0.1\n";
  const auto from_file = RunProcess({ACQUIRER_SIM_BIN, "--config", config_file.string()},
                                    {{"HTTP_PORT", "0"}, {"DATA_DIR", dir.string()}, {"AUTH_API_KEYS", kKeyA}});
  EXPECT_EQ(from_file.exit_code, 2);
  EXPECT_THAT(from_file.err, HasSubstr("http.address"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace charge_outbox::testing
