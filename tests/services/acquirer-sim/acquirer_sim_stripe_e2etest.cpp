// acquirer-sim's Stripe dialect through the real binary: the requests docs/stripe.md says the adapter
// sends, Stripe's idempotency layer, the faults on these routes, and a SIGKILL in between. Every test
// starts its own simulator.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <future>
#include <set>

#include "sim_process.hpp"

namespace charge_outbox::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ::testing::HasSubstr;

// The capture as docs/stripe.md's adapter sends it: brackets percent-encoded.
std::string IntentBody(const std::string& charge_id, std::int64_t amount = 25000,
                       const std::string& payment_method = "pm_tok_visa") {
  return "amount=" + std::to_string(amount) + "&currency=brl&payment_method=" + payment_method +
         "&confirm=true&off_session=true&payment_method_types%5B%5D=card&metadata%5Bcharge_id%5D=" + charge_id +
         "&expand%5B%5D=latest_charge";
}

std::string SearchTarget(const std::string& charge_id) {
  return "/v1/payment_intents/search?query=metadata%5B%27charge_id%27%5D%3A%27" + charge_id +
         "%27&limit=10&expand%5B%5D=data.latest_charge";
}

HttpHeaders FormAuth(const char* api_key, const std::string& idempotency_key = {}) {
  auto headers = Auth(api_key, idempotency_key);
  headers.emplace_back("Content-Type", "application/x-www-form-urlencoded");
  headers.emplace_back("Stripe-Version", "2024-06-20");
  return headers;
}

std::string Text(const boost::json::value& v, std::string_view member) {
  return std::string(v.at(member).as_string());
}

class StripeE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / UniqueName("acquirer_sim_stripe_e2e");
    Start();
  }
  void TearDown() override {
    ExpectStillRunning(*sim_);
    client_.reset();
    sim_.reset();
    fs::remove_all(dir_);
  }
  // A simulator on this test's data directory (the one before it must be gone).
  void Start(EnvChanges env = {}) {
    client_.reset();
    sim_.reset();
    sim_ = std::make_unique<Sim>(dir_ / "data", env);
    client_ = std::make_unique<HttpTestClient>(sim_->port());
  }

  HttpResult Create(const std::string& key, const std::string& body, const char* api_key = kKeyA) {
    return client_->Post("/v1/payment_intents", body, FormAuth(api_key, key));
  }
  HttpResult Refund(const std::string& key, const std::string& intent, const char* api_key = kKeyA) {
    return client_->Post("/v1/refunds", "payment_intent=" + intent + "&metadata%5Bcharge_id%5D=x",
                         FormAuth(api_key, key));
  }
  boost::json::array Search(const std::string& charge_id, const char* api_key = kKeyA) {
    const auto r = client_->Get(SearchTarget(charge_id), Auth(api_key));
    EXPECT_EQ(r.status(), 200u) << r.response.body();
    return r.status() == 200u ? r.json().at("data").as_array() : boost::json::array{};
  }
  void SetFaults(const std::string& profile) {
    const auto r = client_->Put("/admin/faults", profile);
    ASSERT_EQ(r.status(), 200u) << r.response.body();
  }
  boost::json::array Ledger() { return client_->Get("/admin/ledger").json().at("entries").as_array(); }
  boost::json::value Stats() { return client_->Get("/admin/stats").json(); }

  fs::path dir_;
  std::unique_ptr<Sim> sim_;
  std::unique_ptr<HttpTestClient> client_;
};

TEST_F(StripeE2E, CreateCapturesAndTheSameRequestReplaysItByteForByte) {
  const auto first = Create("k1", IntentBody("ch_1"));
  ASSERT_EQ(first.status(), 200u) << first.response.body();
  EXPECT_EQ(first.header("Idempotent-Replayed"), "");
  const auto pi = first.json();
  EXPECT_THAT(Text(pi, "id"), ::testing::StartsWith("pi_"));
  EXPECT_EQ(Text(pi, "object"), "payment_intent");
  EXPECT_EQ(Text(pi, "status"), "succeeded");
  EXPECT_EQ(Text(pi, "currency"), "brl");
  EXPECT_EQ(pi.at("amount").as_int64(), 25000);
  EXPECT_EQ(pi.at("amount_received").as_int64(), 25000);
  EXPECT_EQ(Text(pi, "capture_method"), "automatic");
  EXPECT_EQ(Text(pi.at("metadata"), "charge_id"), "ch_1");
  EXPECT_TRUE(pi.at("last_payment_error").is_null());
  const auto& charge = pi.at("latest_charge");  // expand[]=latest_charge
  EXPECT_EQ(Text(charge, "object"), "charge");
  EXPECT_EQ(Text(charge, "payment_intent"), Text(pi, "id"));
  EXPECT_FALSE(charge.at("refunded").as_bool());

  // The same parameters in another order and encoding are the same request.
  const auto replay = Create("k1",
                             "metadata[charge_id]=ch_1&expand[]=latest_charge&amount=25000&currency=brl&"
                             "payment_method=pm_tok_visa&confirm=true&off_session=true&payment_method_types[]=card");
  EXPECT_EQ(replay.status(), 200u);
  EXPECT_EQ(replay.header("Idempotent-Replayed"), "true");
  EXPECT_EQ(replay.response.body(), first.response.body());

  const auto ledger = Ledger();
  ASSERT_EQ(ledger.size(), 1u);
  EXPECT_EQ(Text(ledger[0], "type"), "capture");
  EXPECT_EQ(Text(ledger[0], "id"), Text(pi, "id"));
  EXPECT_EQ(Text(ledger[0], "idempotency_key"), "k1");
  EXPECT_EQ(Text(ledger[0], "reference"), "ch_1");
  EXPECT_EQ(Text(ledger[0], "currency"), "BRL");  // the ledger's ISO spelling, whatever the dialect
  EXPECT_EQ(Stats().at("requests").at("capture").as_int64(), 2);
}

TEST_F(StripeE2E, OtherParamsWithTheKeyAreAnIdempotencyErrorAndDoNothing) {
  ASSERT_EQ(Create("k1", IntentBody("ch_1")).status(), 200u);
  const auto other = Create("k1", IntentBody("ch_1", 25001));
  EXPECT_EQ(other.status(), 400u);
  EXPECT_EQ(Text(other.json().at("error"), "type"), "idempotency_error");
  EXPECT_THAT(Text(other.json().at("error"), "message"), HasSubstr("same parameters"));
  // The key is one namespace for both POST routes: a refund with it is other parameters too.
  EXPECT_EQ(Text(Refund("k1", "pi_x").json().at("error"), "type"), "idempotency_error");
  EXPECT_EQ(Ledger().size(), 1u);
}

TEST_F(StripeE2E, InvalidParamsAre400AndNotStoredUnderTheKey) {
  const auto unknown = Create("k1", IntentBody("ch_1") + "&customer=cus_1");
  ASSERT_EQ(unknown.status(), 400u);
  const auto error = unknown.json().at("error");
  EXPECT_EQ(Text(error, "type"), "invalid_request_error");
  EXPECT_EQ(Text(error, "code"), "parameter_unknown");
  EXPECT_EQ(Text(error, "param"), "customer");
  const auto upper = Create("k1", "amount=1&currency=BRL&payment_method=pm&confirm=true&metadata[charge_id]=c");
  EXPECT_EQ(Text(upper.json().at("error"), "param"), "currency");
  EXPECT_EQ(Text(Create("k1", "currency=brl").json().at("error"), "code"), "parameter_missing");
  // None of them used the key.
  const auto good = Create("k1", IntentBody("ch_1"));
  EXPECT_EQ(good.status(), 200u);
  EXPECT_EQ(good.header("Idempotent-Replayed"), "");
  // 401 comes before anything.
  EXPECT_EQ(client_->Post("/v1/payment_intents", IntentBody("ch_1"), {{"Idempotency-Key", "k1"}}).status(), 401u);
}

TEST_F(StripeE2E, TheSameKeyWhileTheFirstRunsIs409AndStoresNothing) {
  SetFaults(R"({"latency": {"distribution": "fixed", "ms": 1500}})");
  auto first = std::async(std::launch::async, [this] {
    auto client = sim_->Client();
    return client.Post("/v1/payment_intents", IntentBody("ch_1"), FormAuth(kKeyA, "k1"));
  });
  ASSERT_TRUE(Eventually([&] { return Stats().at("in_flight").as_int64() == 1; }));
  const auto second = Create("k1", IntentBody("ch_1"));
  EXPECT_EQ(second.status(), 409u);
  EXPECT_EQ(Text(second.json().at("error"), "code"), "idempotency_key_in_use");
  EXPECT_EQ(Text(second.json().at("error"), "type"), "invalid_request_error");
  const auto first_result = first.get();
  ASSERT_EQ(first_result.status(), 200u);
  SetFaults("{}");
  const auto replay = Create("k1", IntentBody("ch_1"));
  EXPECT_EQ(replay.header("Idempotent-Replayed"), "true");
  EXPECT_EQ(replay.response.body(), first_result.response.body());
  EXPECT_EQ(Ledger().size(), 1u);
}

TEST_F(StripeE2E, DeclinesAre402CardErrorsStoredAndTheDeclinedPaymentIntentIsFound) {
  const auto declined = Create("d1", IntentBody("ch_d", 500, "pm_tok_insufficient"));
  ASSERT_EQ(declined.status(), 402u) << declined.response.body();
  const auto error = declined.json().at("error");
  EXPECT_EQ(Text(error, "type"), "card_error");
  EXPECT_EQ(Text(error, "code"), "card_declined");
  EXPECT_EQ(Text(error, "decline_code"), "insufficient_funds");
  const auto& pi = error.at("payment_intent");
  EXPECT_EQ(Text(pi, "status"), "requires_payment_method");
  EXPECT_EQ(Text(pi.at("last_payment_error"), "decline_code"), "insufficient_funds");
  const auto replay = Create("d1", IntentBody("ch_d", 500, "pm_tok_insufficient"));
  EXPECT_EQ(replay.status(), 402u);
  EXPECT_EQ(replay.header("Idempotent-Replayed"), "true");
  EXPECT_EQ(replay.response.body(), declined.response.body());

  const auto found = Search("ch_d");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(Text(found[0], "status"), "requires_payment_method");
  const auto retrieved = client_->Get("/v1/payment_intents/" + Text(pi, "id"), Auth(kKeyA));
  EXPECT_EQ(Text(retrieved.json(), "status"), "requires_payment_method");
  EXPECT_TRUE(Ledger().empty());  // declines are not in the ledger
  // A declined PaymentIntent cannot be refunded.
  const auto refund = Refund("r1", Text(pi, "id"));
  EXPECT_EQ(refund.status(), 400u);
  EXPECT_EQ(Text(refund.json().at("error"), "code"), "payment_intent_unexpected_state");
}

TEST_F(StripeE2E, AStored500IsReplayedWhetherOrNotThePaymentIntentWasMade) {
  SetFaults(R"({"seed": 5, "server_error_rate": 1})");
  std::set<std::string> made, not_made;
  for (int i = 0; i < 12; ++i) {
    const std::string charge = "ch_" + std::to_string(i);
    const auto r = Create("k" + std::to_string(i), IntentBody(charge));
    ASSERT_EQ(r.status(), 500u) << r.response.body();
    EXPECT_EQ(Text(r.json().at("error"), "type"), "api_error");
    EXPECT_EQ(r.header("Stripe-Should-Retry"), "");
  }
  SetFaults("{}");
  const auto ledger = Ledger();
  std::set<std::string> in_ledger;
  for (const auto& entry : ledger) in_ledger.insert(Text(entry, "reference"));
  for (int i = 0; i < 12; ++i) {
    const std::string charge = "ch_" + std::to_string(i);
    const auto replay = Create("k" + std::to_string(i), IntentBody(charge));
    EXPECT_EQ(replay.status(), 500u) << charge;  // for as long as the key lives, done or not
    EXPECT_EQ(replay.header("Idempotent-Replayed"), "true");
    const bool found = !Search(charge).empty();
    EXPECT_EQ(found, in_ledger.contains(charge)) << charge;
    (found ? made : not_made).insert(charge);
  }
  // Seed 5 gives both cases (the work is done with probability 1/2).
  EXPECT_FALSE(made.empty());
  EXPECT_FALSE(not_made.empty());
  EXPECT_EQ(ledger.size(), made.size());
}

TEST_F(StripeE2E, OurDialectsServerErrorKeepsTheKeyOnlyIfTheWorkWasDone) {
  SetFaults(R"({"seed": 5, "server_error_rate": 1})");
  const auto body = [](int i) {
    return R"({"amount": 100, "currency": "BRL", "reference": "ch_)" + std::to_string(i) +
           R"(", "payment_method": "pm_tok_visa"})";
  };
  for (int i = 0; i < 12; ++i) {
    const auto r = client_->Post("/v1/captures", body(i), Auth(kKeyA, "k" + std::to_string(i)));
    ASSERT_EQ(r.status(), 500u);
    EXPECT_EQ(r.header("Content-Type"), "application/problem+json");
  }
  const auto done = Ledger().size();
  EXPECT_GT(done, 0u);
  EXPECT_LT(done, 12u);
  SetFaults("{}");
  std::size_t replayed = 0;
  for (int i = 0; i < 12; ++i) {
    const auto r = client_->Post("/v1/captures", body(i), Auth(kKeyA, "k" + std::to_string(i)));
    ASSERT_EQ(r.status(), 201u);
    if (r.header("Idempotent-Replayed") == "true") ++replayed;
  }
  EXPECT_EQ(replayed, done);      // a done capture is the key's, answered 201 now
  EXPECT_EQ(Ledger().size(), 12u);  // the others were free: captured now, once
}

TEST_F(StripeE2E, ThrottlesAndLoadBalancerErrorsAreNotStored) {
  SetFaults(R"({"throttle_rate": 1})");
  const auto throttled = Create("k1", IntentBody("ch_1"));
  EXPECT_EQ(throttled.status(), 429u);
  EXPECT_EQ(Text(throttled.json().at("error"), "code"), "rate_limit");
  SetFaults(R"({"error_rate": 1})");
  const auto unavailable = Create("k1", IntentBody("ch_1"));
  EXPECT_EQ(unavailable.status(), 503u);
  EXPECT_THAT(unavailable.header("Content-Type"), HasSubstr("text/html"));
  SetFaults("{}");
  const auto created = Create("k1", IntentBody("ch_1"));
  EXPECT_EQ(created.status(), 200u);
  EXPECT_EQ(created.header("Idempotent-Replayed"), "");
  EXPECT_EQ(Ledger().size(), 1u);
}

TEST_F(StripeE2E, AKeyPastItsRetentionIsANewRequest) {
  Start({{"STRIPE_IDEMPOTENCY_KEY_RETENTION", "1s"}});
  const auto started = std::chrono::steady_clock::now();
  const auto first = Create("k1", IntentBody("ch_1"));
  ASSERT_EQ(first.status(), 200u);
  EXPECT_EQ(Create("k1", IntentBody("ch_1")).header("Idempotent-Replayed"), "true");
  HttpResult later;
  ASSERT_TRUE(Eventually([&] {
    later = Create("k1", IntentBody("ch_1"));
    return later.header("Idempotent-Replayed").empty();
  }));
  EXPECT_GE(std::chrono::steady_clock::now() - started, 950ms);
  ASSERT_EQ(later.status(), 200u);
  EXPECT_NE(Text(later.json(), "id"), Text(first.json(), "id"));
  const auto ledger = Ledger();
  ASSERT_EQ(ledger.size(), 2u);  // the same key captured twice: what the adapter must never let happen
  EXPECT_EQ(Text(ledger[1], "idempotency_key"), "k1");
  EXPECT_EQ(Search("ch_1").size(), 2u);
}

TEST_F(StripeE2E, NoIdempotencyKeyMakesEveryPostNew) {
  ASSERT_EQ(Create("", IntentBody("ch_1")).status(), 200u);
  ASSERT_EQ(Create("", IntentBody("ch_1")).status(), 200u);
  EXPECT_EQ(Ledger().size(), 2u);
}

TEST_F(StripeE2E, SearchFindsAPaymentIntentOnlyAfterTheLagButRetrieveAtOnce) {
  Start({{"STRIPE_SEARCH_RATE_LIMIT", "10000"}});  // the test polls faster than Stripe lets anyone search
  SetFaults(R"({"search_lag_ms": 1500})");
  const auto created_at = std::chrono::steady_clock::now();
  const auto created = Create("k1", IntentBody("ch_1"));
  ASSERT_EQ(created.status(), 200u);
  EXPECT_TRUE(Search("ch_1").empty());
  const auto retrieved =
      client_->Get("/v1/payment_intents/" + Text(created.json(), "id") + "?expand%5B%5D=latest_charge", Auth(kKeyA));
  ASSERT_EQ(retrieved.status(), 200u);
  EXPECT_EQ(Text(retrieved.json().at("latest_charge"), "object"), "charge");
  ASSERT_TRUE(Eventually([&] { return !Search("ch_1").empty(); }));
  EXPECT_GE(std::chrono::steady_clock::now() - created_at, 1400ms);
  const auto found = Search("ch_1");
  EXPECT_EQ(Text(found[0], "id"), Text(created.json(), "id"));
  EXPECT_EQ(Text(found[0].at("latest_charge"), "object"), "charge");  // expand[]=data.latest_charge
  // Double quotes work too; any other query is a 400.
  const auto quoted = client_->Get("/v1/payment_intents/search?query=metadata%5B%22charge_id%22%5D%3A%22ch_1%22",
                                   Auth(kKeyA));
  EXPECT_EQ(quoted.json().at("data").as_array().size(), 1u);
  const auto other = client_->Get("/v1/payment_intents/search?query=status%3A%27succeeded%27", Auth(kKeyA));
  EXPECT_EQ(other.status(), 400u);
  EXPECT_EQ(Text(other.json().at("error"), "type"), "invalid_request_error");
  // Another merchant's: neither found nor retrieved.
  EXPECT_TRUE(Search("ch_1", kKeyB).empty());
  const auto foreign = client_->Get("/v1/payment_intents/" + Text(created.json(), "id"), Auth(kKeyB));
  EXPECT_EQ(foreign.status(), 404u);
  EXPECT_EQ(Text(foreign.json().at("error"), "code"), "resource_missing");
  EXPECT_EQ(Text(foreign.json().at("error"), "param"), "intent");
}

TEST_F(StripeE2E, SearchesBeyondTheRateLimitAre429PerMerchant) {
  Start({{"STRIPE_SEARCH_RATE_LIMIT", "2"}});
  std::vector<unsigned> statuses;
  for (int i = 0; i < 10; ++i) statuses.push_back(client_->Get(SearchTarget("ch_1"), Auth(kKeyA)).status());
  EXPECT_EQ(statuses[0], 200u);  // a burst of the rate
  EXPECT_EQ(statuses[1], 200u);
  EXPECT_GE(std::count(statuses.begin(), statuses.end(), 429u), 6);
  // The bucket refills a token in 500 ms: a search right after is refused before its query is even read.
  const auto bad = client_->Get("/v1/payment_intents/search?query=nonsense", Auth(kKeyA));
  ASSERT_EQ(bad.status(), 429u);
  EXPECT_EQ(Text(bad.json().at("error"), "code"), "rate_limit");
  EXPECT_EQ(Text(bad.json().at("error"), "type"), "invalid_request_error");
  EXPECT_EQ(client_->Get(SearchTarget("ch_1"), Auth(kKeyB)).status(), 200u);  // another merchant's bucket
  EXPECT_EQ(client_->Get("/v1/payment_intents?limit=1", Auth(kKeyA)).status(), 200u);  // search only
  EXPECT_TRUE(Eventually([&] { return client_->Get(SearchTarget("ch_1"), Auth(kKeyA)).status() == 200u; }));
}

TEST_F(StripeE2E, EventsCarryTheRequestsIdempotencyKeyNewestFirst) {
  const auto captured = Create("k1", IntentBody("ch_1"));
  const auto declined = Create("k2", IntentBody("ch_2", 5, "pm_tok_declined"));
  const auto keyless = Create("", IntentBody("ch_3"));
  ASSERT_EQ(captured.status(), 200u);
  ASSERT_EQ(declined.status(), 402u);
  ASSERT_EQ(keyless.status(), 200u);
  const std::int64_t s = captured.json().at("created").as_int64();
  // The adapter's look-up by events, as docs/stripe.md has it.
  const std::string target = "/v1/events?types%5B%5D=payment_intent.succeeded&types%5B%5D=payment_intent.payment_failed"
                             "&created%5Bgte%5D=" + std::to_string(s) + "&created%5Blte%5D=" + std::to_string(s + 5) +
                             "&limit=100";
  const auto r = client_->Get(target, Auth(kKeyA));
  ASSERT_EQ(r.status(), 200u) << r.response.body();
  EXPECT_EQ(Text(r.json(), "object"), "list");
  EXPECT_FALSE(r.json().at("has_more").as_bool());
  const auto events = r.json().at("data").as_array();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(Text(events[0], "type"), "payment_intent.succeeded");
  EXPECT_TRUE(events[0].at("request").at("idempotency_key").is_null());
  EXPECT_EQ(Text(events[1], "type"), "payment_intent.payment_failed");
  EXPECT_EQ(Text(events[1].at("request"), "idempotency_key"), "k2");
  EXPECT_EQ(Text(events[1].at("data").at("object"), "status"), "requires_payment_method");
  EXPECT_EQ(Text(events[2], "type"), "payment_intent.succeeded");
  EXPECT_EQ(Text(events[2].at("request"), "idempotency_key"), "k1");
  EXPECT_EQ(Text(events[2].at("data").at("object"), "id"), Text(captured.json(), "id"));
  EXPECT_EQ(Text(events[2], "api_version"), "2024-06-20");
  EXPECT_THAT(Text(events[2], "id"), ::testing::StartsWith("evt_"));
  // Paged one at a time with starting_after.
  const auto page = client_->Get("/v1/events?limit=1&starting_after=" + Text(events[0], "id"), Auth(kKeyA));
  EXPECT_EQ(Text(page.json().at("data").at(0), "id"), Text(events[1], "id"));
  EXPECT_TRUE(page.json().at("has_more").as_bool());
  EXPECT_TRUE(client_->Get("/v1/events", Auth(kKeyB)).json().at("data").as_array().empty());
  EXPECT_EQ(Stats().at("requests").at("events").as_int64(), 3);
}

TEST_F(StripeE2E, ARefundShowsOnTheChargeVoidsTheLedgerAndASecondIsAlreadyRefunded) {
  const auto created = Create("k1", IntentBody("ch_1", 700));
  const std::string pi = Text(created.json(), "id");
  const auto refund = Refund("r1", pi);
  ASSERT_EQ(refund.status(), 200u) << refund.response.body();
  EXPECT_THAT(Text(refund.json(), "id"), ::testing::StartsWith("re_"));
  EXPECT_EQ(Text(refund.json(), "status"), "succeeded");
  EXPECT_EQ(refund.json().at("amount").as_int64(), 700);
  EXPECT_EQ(Text(refund.json(), "payment_intent"), pi);
  EXPECT_EQ(Text(refund.json().at("metadata"), "charge_id"), "x");
  const auto replay = Refund("r1", pi);
  EXPECT_EQ(replay.header("Idempotent-Replayed"), "true");
  EXPECT_EQ(replay.response.body(), refund.response.body());

  const auto again = Refund("r2", pi);
  EXPECT_EQ(again.status(), 400u);
  EXPECT_EQ(Text(again.json().at("error"), "code"), "charge_already_refunded");
  const auto partial = client_->Post("/v1/refunds", "payment_intent=" + pi + "&amount=1", FormAuth(kKeyA, "r3"));
  EXPECT_EQ(partial.status(), 400u);
  EXPECT_EQ(Refund("r4", "pi_unknown").status(), 404u);
  EXPECT_EQ(Text(Refund("r5", pi, kKeyB).json().at("error"), "param"), "payment_intent");

  const auto now = Search("ch_1").at(0);
  EXPECT_EQ(Text(now, "status"), "succeeded");  // as at Stripe: the charge shows the refund
  EXPECT_TRUE(now.at("latest_charge").at("refunded").as_bool());
  EXPECT_EQ(now.at("latest_charge").at("amount_refunded").as_int64(), 700);
  const auto ledger = Ledger();
  ASSERT_EQ(ledger.size(), 2u);
  EXPECT_EQ(Text(ledger[1], "type"), "void");
  EXPECT_EQ(Text(ledger[1], "id"), pi);
  EXPECT_EQ(Text(ledger[1], "idempotency_key"), "r1");
  const auto events = client_->Get("/v1/events?type=charge.refunded", Auth(kKeyA)).json().at("data").as_array();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(Text(events[0].at("request"), "idempotency_key"), "r1");
  EXPECT_TRUE(events[0].at("data").at("object").at("refunded").as_bool());
  EXPECT_EQ(Stats().at("requests").at("void").as_int64(), 6);
}

TEST_F(StripeE2E, RefundsIgnoreTheVoidWindow) {
  SetFaults(R"({"void_window_ms": 1})");
  const auto created = Create("k1", IntentBody("ch_1"));
  std::this_thread::sleep_for(20ms);  // past the window: our void would be refused now
  EXPECT_EQ(Refund("r1", Text(created.json(), "id")).status(), 200u);
}

TEST_F(StripeE2E, ListIsNewestFirstAndPagesStablyWithStartingAfter) {
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) {
    const auto n = std::to_string(i);
    ids.push_back(Text(Create("k" + n, IntentBody("ch_" + n)).json(), "id"));
  }
  ASSERT_EQ(Create("d", IntentBody("ch_d", 1, "pm_tok_declined")).status(), 402u);  // every status is listed
  Create("other", IntentBody("ch_b"), kKeyB);
  const auto credential_check = client_->Get("/v1/payment_intents?limit=1", Auth(kKeyA));
  ASSERT_EQ(credential_check.status(), 200u);
  EXPECT_EQ(Text(credential_check.json().at("data").at(0), "status"), "requires_payment_method");

  const std::int64_t s = credential_check.json().at("data").at(0).at("created").as_int64() - 60;
  const std::string window = "/v1/payment_intents?created%5Bgte%5D=" + std::to_string(s) +
                             "&created%5Blt%5D=" + std::to_string(s + 120) + "&expand%5B%5D=data.latest_charge&limit=2";
  auto page = client_->Get(window, Auth(kKeyA)).json();
  std::vector<std::string> seen;
  for (const auto& pi : page.at("data").as_array()) seen.push_back(Text(pi, "id"));
  EXPECT_TRUE(page.at("has_more").as_bool());
  ASSERT_EQ(Create("k_new", IntentBody("ch_new")).status(), 200u);  // newer: before the cursor, never after
  while (page.at("has_more").as_bool()) {
    page = client_->Get(window + "&starting_after=" + seen.back(), Auth(kKeyA)).json();
    for (const auto& pi : page.at("data").as_array()) seen.push_back(Text(pi, "id"));
  }
  ASSERT_EQ(seen.size(), 6u);
  EXPECT_EQ(std::vector<std::string>(seen.begin() + 1, seen.end()),
            (std::vector<std::string>{ids[4], ids[3], ids[2], ids[1], ids[0]}));
  const auto unknown = client_->Get("/v1/payment_intents?starting_after=pi_unknown", Auth(kKeyA));
  EXPECT_EQ(unknown.status(), 400u);
  EXPECT_EQ(Stats().at("requests").at("list").as_int64(), 5);
}

TEST_F(StripeE2E, SigkillThenRestartKeepsPaymentIntentsStoredAnswersRefundsAndEvents) {
  const auto created = Create("k1", IntentBody("ch_1"));
  const auto declined = Create("k2", IntentBody("ch_2", 5, "pm_tok_declined"));
  const std::string pi = Text(created.json(), "id");
  const auto refund = Refund("r1", pi);
  ASSERT_EQ(refund.status(), 200u);
  SetFaults(R"({"seed": 5, "server_error_rate": 1})");
  const auto failed = Create("k3", IntentBody("ch_3"));
  ASSERT_EQ(failed.status(), 500u);
  SetFaults("{}");
  const auto events_before = client_->Get("/v1/events", Auth(kKeyA)).response.body();
  const auto ledger_before = client_->Get("/admin/ledger").response.body();

  sim_->process().Signal(SIGKILL);
  EXPECT_EQ(sim_->process().Wait(10s).term_signal, SIGKILL);
  Start();

  EXPECT_EQ(client_->Get("/admin/ledger").response.body(), ledger_before);
  EXPECT_EQ(client_->Get("/v1/events", Auth(kKeyA)).response.body(), events_before);
  for (const auto& [key, body, first] : {std::tuple{"k1", IntentBody("ch_1"), &created},
                                         std::tuple{"k2", IntentBody("ch_2", 5, "pm_tok_declined"), &declined},
                                         std::tuple{"k3", IntentBody("ch_3"), &failed}}) {
    const auto replay = Create(key, body);
    EXPECT_EQ(replay.status(), first->status()) << key;
    EXPECT_EQ(replay.response.body(), first->response.body()) << key;
    EXPECT_EQ(replay.header("Idempotent-Replayed"), "true") << key;
  }
  const auto refund_replay = Refund("r1", pi);
  EXPECT_EQ(refund_replay.response.body(), refund.response.body());
  EXPECT_EQ(Text(Refund("r2", pi).json().at("error"), "code"), "charge_already_refunded");
  EXPECT_TRUE(Search("ch_1").at(0).at("latest_charge").at("refunded").as_bool());
  EXPECT_EQ(Text(Search("ch_2").at(0), "status"), "requires_payment_method");
}

TEST_F(StripeE2E, UnknownRoutesAreStripeShaped404s) {
  const auto r = client_->Get("/v1/customers", Auth(kKeyA));
  EXPECT_EQ(r.status(), 404u);
  const auto wrong_method = client_->Post("/v1/events", "", FormAuth(kKeyA));
  EXPECT_EQ(wrong_method.status(), 404u);
  EXPECT_THAT(Text(wrong_method.json().at("error"), "message"), HasSubstr("Unrecognized request URL"));
  EXPECT_EQ(Stats().at("requests").at("retrieve").as_int64(), 0);
}

}  // namespace
}  // namespace charge_outbox::testing
