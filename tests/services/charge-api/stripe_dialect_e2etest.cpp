// Stripe's edges, end to end: charge-api and the reconciler with acquirer.kind stripe against acquirer-sim's
// Stripe dialect (services/acquirer-sim/README.md, "Stripe dialect") and a real PostgreSQL. Each test is one
// of Stripe's rules (docs/stripe.md) and shows the state it leaves, the answer the client reads, and the
// acquirer's ledger: a stored 500 replayed, a key pruned and then retried, search lag, a key used with other
// parameters, a key still in use.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

#include <filesystem>
#include <set>
#include <thread>

#include "charge_stack.hpp"
#include "http_test_client.hpp"
#include "pg_test_database.hpp"
#include "service_process.hpp"
#include "test_env.hpp"
#include "window_report.hpp"
#include "charge_outbox/util/time.hpp"

namespace charge_outbox::testing {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kMerchant = "00000000-0000-4000-8000-000000000001";
constexpr const char* kApiKey = "sk_test_stripe_dialect";
constexpr const char* kAcquirerKey = "sk_test_acquirer_stripe_dialect";

std::string ChargeBody(std::int64_t amount = 25000) {
  return R"({"amount": )" + std::to_string(amount) +
         R"(, "currency": "BRL", "order_id": "PED-1", "payment_method": "pm_tok_visa"})";
}

HttpHeaders ChargeHeaders(const std::string& key) {
  return {{"Authorization", std::string("Bearer ") + kApiKey},
          {"Content-Type", "application/json"},
          {"Idempotency-Key", key}};
}

class StripeDialectE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = PgTestDatabase::Create(::testing::UnitTest::GetInstance()->current_test_info()->name(),
                                 PgTestDatabase::Schema::kMigrated);
    InsertMerchant(*db_, kMerchant, kApiKey);
    dir_ = fs::temp_directory_path() / UniqueName("stripe_dialect_e2e");
  }

  void TearDown() override {
    sim_client_.reset();
    sim_.reset();
    fs::remove_all(dir_);
  }

  void StartAcquirer(const EnvChanges& extra = {}) {
    EnvChanges env{{"HTTP_PORT", "0"}, {"DATA_DIR", (dir_ / "sim").string()}, {"AUTH_API_KEYS", kAcquirerKey}};
    for (const auto& [k, v] : extra) env[k] = v;
    sim_ = std::make_unique<ServiceProcess>(std::vector<std::string>{ACQUIRER_SIM_BIN}, env);
    sim_client_ = std::make_unique<HttpTestClient>(sim_->port());
  }

  EnvChanges ApiEnv(const EnvChanges& extra = {}) {
    auto env = FastChargeApiEnv(db_->url(), sim_->port(), kAcquirerKey);
    env["ACQUIRER_KIND"] = "stripe";
    for (const auto& [k, v] : extra) env[k] = v;
    return env;
  }

  std::unique_ptr<ServiceProcess> StartApi(const EnvChanges& extra = {}) {
    return std::make_unique<ServiceProcess>(std::vector<std::string>{CHARGE_API_BIN}, ApiEnv(extra));
  }

  EnvChanges ReconcilerEnv(const EnvChanges& extra = {}) {
    auto env = FastAcquirerClientEnv(db_->url(), sim_->port(), kAcquirerKey);
    env["ACQUIRER_KIND"] = "stripe";
    env["ACQUIRER_STRIPE_SEARCH_LAG"] = "1s";
    env["RECONCILER_GRACE_PERIOD"] = "0s";
    env["RECONCILER_CLAIM_LEASE"] = "4s";
    env["RECONCILER_BACKOFF_BASE"] = "100ms";
    env["RECONCILER_BACKOFF_MAX"] = "200ms";
    env["RECONCILER_VISIBILITY_WINDOW"] = "1s";
    env["METRICS_PUSHGATEWAY_URL"] = std::nullopt;
    for (const auto& [k, v] : extra) env[k] = v;
    return env;
  }

  ProcessResult RunReconciler(const EnvChanges& extra = {}) {
    return RunProcess({RECONCILER_BIN}, ReconcilerEnv(extra), 60s);
  }

  static HttpResult Post(ServiceProcess& api, const std::string& key, const std::string& body = ChargeBody()) {
    HttpTestClient client(api.port(), "127.0.0.1", 30s);
    return client.Post("/v1/charges", body, ChargeHeaders(key));
  }

  void SetFaults(const std::string& profile) {
    const auto r = sim_client_->Put("/admin/faults", profile);
    ASSERT_EQ(r.status(), 200u) << r.response.body();
  }

  std::int64_t AcquirerRequests(const std::string& operation) {
    return sim_client_->Get("/admin/stats").json().at("requests").at(operation).as_int64();
  }
  static std::string AcquirerKey(const std::string& key) { return std::string(kMerchant) + ":" + key; }
  std::size_t Ledger(std::string_view type, const std::string& key) {
    return AcquirerLedgerCount(*sim_client_, type, AcquirerKey(key));
  }
  std::string Field(const std::string& key, const std::string& column) {
    return db_->Scalar("SELECT " + column + " FROM charges WHERE idempotency_key = '" + key + "'");
  }
  std::string Outcomes(const std::string& key) {
    return db_->Scalar(
        "SELECT string_agg(operation || ':' || coalesce(outcome, '-') || ':' || coalesce(http_status::text, '-'), ','"
        " ORDER BY attempt_no) FROM acquirer_attempts WHERE charge_id = "
        "(SELECT id FROM charges WHERE idempotency_key = '" + key + "')");
  }

  // A PaymentIntent made at the acquirer directly, as another client of the same account would.
  HttpResult CreateIntentDirectly(const std::string& idempotency_key, std::int64_t amount, const std::string& charge_id) {
    return sim_client_->Post("/v1/payment_intents",
                             "amount=" + std::to_string(amount) +
                                 "&currency=brl&payment_method=pm_tok_visa&confirm=true&metadata%5Bcharge_id%5D=" +
                                 charge_id,
                             {{"Authorization", std::string("Bearer ") + kAcquirerKey},
                              {"Content-Type", "application/x-www-form-urlencoded"},
                              {"Idempotency-Key", idempotency_key}});
  }

  std::unique_ptr<PgTestDatabase> db_;
  fs::path dir_;
  std::unique_ptr<ServiceProcess> sim_;
  std::unique_ptr<HttpTestClient> sim_client_;
};

// Stripe keeps a 500 under the key once the endpoint ran, whether or not it created the PaymentIntent, and
// replays it. charge-api answers 202 pending (never a decline) after one capture; the reconciler's search
// tells which charges were captured, and the others reach a person at the deadline, never `failed`.
TEST_F(StripeDialectE2E, AStored500IsPendingNeverDeclinedAndTheSearchTellsWhatHappened) {
  StartAcquirer();
  auto api = StartApi({{"CHARGE_DEADLINE", "8s"}});
  SetFaults(R"({"server_error_rate": 1.0, "apply_to": ["capture"]})");
  constexpr int kCharges = 8;
  for (int i = 0; i < kCharges; ++i) {
    const auto key = "s500-" + std::to_string(i);
    const auto r = Post(*api, key);
    ASSERT_EQ(r.status(), 202u) << r.response.body();
    EXPECT_EQ(json::parse(r.response.body()).at("status").as_string(), "pending") << r.response.body();
    // One capture: a stored error is never retried with its key (it could only be replayed).
    EXPECT_EQ(Outcomes(key), "capture:stored_error:500");
  }
  EXPECT_EQ(AcquirerRequests("capture"), kCharges);

  // The client asks again with the same key. The request that takes the charge over looks it up first: a
  // PaymentIntent the 500 made is found and answered 201; without one, the capture's replay is the same
  // 500, and the answer still 202 pending. Never a second PaymentIntent.
  SetFaults("{}");
  for (int i = 0; i < kCharges; ++i) {
    const auto key = "s500-" + std::to_string(i);
    const auto r = Post(*api, key);
    const auto made = Ledger("capture", key);
    ASSERT_LE(made, 1u) << key;
    EXPECT_EQ(r.status(), made == 1 ? 201u : 202u) << key << ": " << r.response.body();
  }

  // The reconciler: a charge whose PaymentIntent exists is captured; the rest stay pending (a resubmit with
  // the key only replays the 500) and go to a person at the deadline.
  const auto rec_env = EnvChanges{{"RECONCILER_DEADLINE", "8s"}};
  Eventually([&] {
    RunReconciler(rec_env);
    return db_->Scalar("SELECT count(*) FROM charges WHERE status = 'pending'") == "0";
  }, 30s);
  int captured = 0, reviewed = 0;
  for (int i = 0; i < kCharges; ++i) {
    const auto key = "s500-" + std::to_string(i);
    const auto status = Field(key, "status");
    if (Ledger("capture", key) == 1) {
      // Found by the search: captured before its deadline, or voided past it; never failed.
      EXPECT_THAT(status, ::testing::AnyOf("captured", "canceled")) << key;
      ++captured;
    } else {
      EXPECT_EQ(status, "needs_review") << key;
      EXPECT_EQ(Field(key, "failure_reason"), "deadline_passed_unconfirmed") << key;
      ++reviewed;
    }
    EXPECT_EQ(Field(key, "decline_code"), "") << key;
  }
  // The simulator's seeded draws do the work for some of the 500s and not for others.
  EXPECT_GT(captured, 0);
  EXPECT_GT(reviewed, 0);
}

// Past Stripe's retention a key is forgotten: a create sent with it would be a second payment. Nothing of ours
// sends one: the deadline is shorter than the retention (or the daemon refuses to start), a retry past it is
// answered from the record, and the reconciler finds the PaymentIntent by search and refunds it.
TEST_F(StripeDialectE2E, AKeyPrunedThenARetryNeverCapturesTwice) {
  StartAcquirer({{"STRIPE_IDEMPOTENCY_KEY_RETENTION", "12s"}});
  const EnvChanges retention{{"ACQUIRER_STRIPE_KEY_RETENTION", "12s"}, {"CHARGE_DEADLINE", "8s"}};

  // A deadline the retention cannot cover is refused at start, naming the key.
  const auto refused = RunProcess({CHARGE_API_BIN}, ApiEnv({{"ACQUIRER_STRIPE_KEY_RETENTION", "12s"},
                                                           {"CHARGE_DEADLINE", "11s"}}), 30s);
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_THAT(refused.out + refused.err, HasSubstr("charge.deadline"));

  auto api = StartApi(retention);
  // Every answer is late: the capture happens, the client's call times out, the charge stays pending.
  SetFaults(R"({"timeout_rate": 1.0, "timeout_delay_ms": 3000, "apply_to": ["capture", "replay"]})");
  const auto first = Post(*api, "pruned");
  ASSERT_EQ(first.status(), 202u) << first.response.body();
  ASSERT_EQ(Ledger("capture", "pruned"), 1u);
  SetFaults("{}");

  // Past the retention: the acquirer has forgotten the key.
  std::this_thread::sleep_for(13s);
  const auto captures_before = AcquirerRequests("capture");
  const auto retried = Post(*api, "pruned");
  EXPECT_EQ(retried.status(), 202u) << retried.response.body();
  EXPECT_EQ(AcquirerRequests("capture"), captures_before) << "a create was sent with a pruned key";
  EXPECT_EQ(Ledger("capture", "pruned"), 1u);

  // The reconciler looks up (never creates), finds the capture past the deadline and refunds it.
  RunReconciler({{"ACQUIRER_STRIPE_KEY_RETENTION", "12s"}, {"RECONCILER_DEADLINE", "8s"}});
  EXPECT_EQ(Field("pruned", "status"), "canceled");
  EXPECT_EQ(Field("pruned", "failure_reason"), "deadline_passed_voided");
  EXPECT_EQ(Ledger("capture", "pruned"), 1u);
  EXPECT_EQ(AcquirerRequests("capture"), captures_before);
  const auto told = Post(*api, "pruned");
  EXPECT_EQ(told.status(), 402u) << told.response.body();
  EXPECT_THAT(told.response.body(), HasSubstr("No money was kept"));
}

// Past the deadline a found capture is refunded. Stripe has one key space per account, and the charge's
// key is the capture's: the refund goes under a key of its own, or Stripe would refuse it as
// idempotency_error and the money would stay taken (the first chaos runs found exactly that).
TEST_F(StripeDialectE2E, ACapturePastTheDeadlineIsRefundedUnderAKeyOfItsOwn) {
  StartAcquirer();
  auto api = StartApi({{"CHARGE_DEADLINE", "4s"}});
  SetFaults(R"({"timeout_rate": 1.0, "timeout_delay_ms": 3000, "apply_to": ["capture", "replay"]})");
  ASSERT_EQ(Post(*api, "late").status(), 202u);
  SetFaults("{}");
  ASSERT_EQ(Ledger("capture", "late"), 1u);
  std::this_thread::sleep_for(4500ms);
  RunReconciler({{"RECONCILER_DEADLINE", "4s"}});
  EXPECT_EQ(Field("late", "status"), "canceled") << Outcomes("late");
  EXPECT_EQ(Field("late", "failure_reason"), "deadline_passed_voided");
  EXPECT_EQ(AcquirerLedgerCount(*sim_client_, "void", "refund:" + AcquirerKey("late")), 1u);
}

// A refund answered 500 is stored under its key, refund made or not, and the key replays it forever. The
// charge stays pending (not a person's at once); the next run reads the PaymentIntent: refunded, canceled;
// still captured, refunded under a fresh key. Each charge's money comes back exactly once.
TEST_F(StripeDialectE2E, ARefundsStored500IsReadAgainAndRefundedUnderAFreshKey) {
  StartAcquirer();
  auto api = StartApi({{"CHARGE_DEADLINE", "4s"}});
  SetFaults(R"({"timeout_rate": 1.0, "timeout_delay_ms": 3000, "apply_to": ["capture", "replay"]})");
  constexpr int kCharges = 8;
  const auto key_of = [](int i) { return "r500-" + std::to_string(i); };
  for (int i = 0; i < kCharges; ++i) ASSERT_EQ(Post(*api, key_of(i)).status(), 202u);
  SetFaults(R"({"server_error_rate": 1.0, "apply_to": ["void"]})");
  std::this_thread::sleep_for(4500ms);
  const EnvChanges past_deadline{{"RECONCILER_DEADLINE", "4s"}};
  RunReconciler(past_deadline);
  const auto refunds = [&](const std::string& key, const std::string& prefix) {
    return AcquirerLedgerCount(*sim_client_, "void", prefix + AcquirerKey(key));
  };
  int refunded_by_the_500 = 0;
  for (int i = 0; i < kCharges; ++i) {
    EXPECT_EQ(Field(key_of(i), "status"), "pending") << Outcomes(key_of(i));
    EXPECT_THAT(Outcomes(key_of(i)), HasSubstr("void:stored_error:500"));
    refunded_by_the_500 += static_cast<int>(refunds(key_of(i), "refund:"));
  }

  SetFaults("{}");
  Eventually([&] {
    RunReconciler(past_deadline);
    return db_->Scalar("SELECT count(*) FROM charges WHERE status = 'pending'") == "0";
  }, 30s);
  int refunded_again = 0;
  for (int i = 0; i < kCharges; ++i) {
    const auto key = key_of(i);
    EXPECT_EQ(Field(key, "status"), "canceled") << Outcomes(key);
    EXPECT_EQ(Field(key, "failure_reason"), "deadline_passed_voided");
    const auto first = refunds(key, "refund:");
    const auto second = refunds(key, "refund2:");
    EXPECT_EQ(first + second, 1u) << key << ": the money came back once";
    refunded_again += static_cast<int>(second);
  }
  // The simulator's seeded draws refund under some of the 500s and not under others.
  EXPECT_GT(refunded_by_the_500, 0);
  EXPECT_GT(refunded_again, 0);
  EXPECT_EQ(refunded_by_the_500 + refunded_again, kCharges);
}

// Search lags behind a PaymentIntent (an hour in Stripe's incidents): a search that finds nothing is not
// "not captured" before the lag has passed, and the reconciler waits rather than resubmit or fail. With the
// events read after the search, the same capture is found at once.
TEST_F(StripeDialectE2E, SearchLagIsWaitedOutAndEventsFindTheCaptureAtOnce) {
  StartAcquirer();
  auto api = StartApi();
  // Every answer is lost after the capture: the charge stays pending. The lag applies to what is made
  // while it is set.
  SetFaults(R"({"drop_rate": 1.0, "apply_to": ["capture", "replay"], "search_lag_ms": 6000})");
  ASSERT_EQ(Post(*api, "lagged").status(), 202u);
  ASSERT_EQ(Ledger("capture", "lagged"), 1u);
  SetFaults(R"({"search_lag_ms": 6000})");

  // Search only: nothing shows, and within the lag that proves nothing.
  const EnvChanges search_only{{"ACQUIRER_STRIPE_EVENTS_PAGES", "0"},
                               {"ACQUIRER_STRIPE_SEARCH_LAG", "6s"},
                               {"RECONCILER_VISIBILITY_WINDOW", "6s"}};
  const auto captures_before = AcquirerRequests("capture");
  RunReconciler(search_only);
  RunReconciler(search_only);
  EXPECT_EQ(Field("lagged", "status"), "pending");
  EXPECT_EQ(AcquirerRequests("capture"), captures_before) << "resubmitted within the search's lag";

  // Events do not lag: another charge left the same way is found on the first look.
  SetFaults(R"({"drop_rate": 1.0, "apply_to": ["capture", "replay"], "search_lag_ms": 6000})");
  ASSERT_EQ(Post(*api, "evented").status(), 202u);
  SetFaults(R"({"search_lag_ms": 6000})");
  const auto searches_before = AcquirerRequests("search");
  RunReconciler({{"ACQUIRER_STRIPE_SEARCH_LAG", "6s"}, {"RECONCILER_VISIBILITY_WINDOW", "6s"}});
  EXPECT_EQ(Field("evented", "status"), "captured") << Outcomes("evented");
  EXPECT_GT(AcquirerRequests("events"), 0);
  EXPECT_GT(AcquirerRequests("search"), searches_before);

  // Past the lag the search shows it: captured, and never captured twice.
  Eventually([&] {
    RunReconciler(search_only);
    return Field("lagged", "status") == "captured";
  }, 30s);
  EXPECT_EQ(Ledger("capture", "lagged"), 1u);
}

// Someone else's request already used our key with other parameters: Stripe's 400 idempotency_error. Our
// capture did not happen under it, but the other request may have captured: a person looks; never failed.
TEST_F(StripeDialectE2E, AKeyUsedWithOtherParametersGoesToAPerson) {
  StartAcquirer();
  auto api = StartApi();
  ASSERT_EQ(CreateIntentDirectly(AcquirerKey("reused"), 999, "someone-else").status(), 200u);
  const auto r = Post(*api, "reused");
  ASSERT_EQ(r.status(), 202u) << r.response.body();
  EXPECT_EQ(json::parse(r.response.body()).at("status").as_string(), "needs_review");
  EXPECT_EQ(Field("reused", "failure_reason"), "acquirer_rejected_request");
  EXPECT_EQ(Outcomes("reused"), "capture:contract_error:400");
  EXPECT_EQ(Ledger("capture", "reused"), 1u);  // the other request's, none of ours
}

// The same key still running at Stripe (our first attempt timed out; Stripe is still at work): 409
// idempotency_key_in_use, waited out with the same key, and the stored answer then replayed.
// The budget (6 s) bounds the wait-out, not the attempt count: full jitter can draw waits near zero, and
// eight attempts once ran out 1.5 s before the 2.5 s capture finished (CI, 6 December).
TEST_F(StripeDialectE2E, AKeyStillInUseIsWaitedOutAndReplayed) {
  StartAcquirer();
  auto api = StartApi({{"ACQUIRER_RETRY_MAX_ATTEMPTS", "100"},
                       {"ACQUIRER_RETRY_BACKOFF_BASE", "400ms"},
                       {"ACQUIRER_RETRY_BACKOFF_MAX", "800ms"},
                       {"ACQUIRER_RETRY_BACKOFF_BUDGET", "6s"},
                       {"CHARGE_LEASE", "8s"}});
  SetFaults(R"({"latency": {"distribution": "fixed", "ms": 2500}, "apply_to": ["capture"]})");
  const auto r = Post(*api, "in-use");
  ASSERT_EQ(r.status(), 201u) << r.response.body() << " attempts: " << Outcomes("in-use");
  EXPECT_EQ(Field("in-use", "status"), "captured");
  EXPECT_THAT(Outcomes("in-use"), HasSubstr("capture:in_flight:409"));
  EXPECT_EQ(Ledger("capture", "in-use"), 1u);
}

// Stripe allows so many searches a second per account; a reconciler run with many workers paces its searches
// under the limit instead of collecting 429s. The same run paced above the limit is refused, which is what
// the pacing saves.
TEST_F(StripeDialectE2E, SearchesArePacedUnderStripesRateLimit) {
  StartAcquirer({{"STRIPE_SEARCH_RATE_LIMIT", "4"}});
  auto api = StartApi();
  SetFaults(R"({"drop_rate": 1.0, "apply_to": ["capture", "replay"]})");
  constexpr int kCharges = 12;
  for (int i = 0; i < kCharges; ++i) ASSERT_EQ(Post(*api, "paced-" + std::to_string(i)).status(), 202u);
  SetFaults("{}");
  const auto throttled = [&] {
    return db_->Scalar("SELECT count(*) FROM acquirer_attempts WHERE operation = 'lookup' AND outcome = 'throttled'");
  };

  // Paced at the acquirer's rate: every charge found, no search refused, and it took the time it must.
  const auto started = std::chrono::steady_clock::now();
  RunReconciler({{"ACQUIRER_STRIPE_SEARCH_RATE_LIMIT", "4"}, {"RECONCILER_CONCURRENCY", "16"},
                 {"ACQUIRER_STRIPE_EVENTS_PAGES", "0"}});
  const auto took = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM charges WHERE status = 'captured'"), std::to_string(kCharges));
  EXPECT_EQ(throttled(), "0");
  EXPECT_GE(took, 2s) << "12 searches at 4 a second, with a burst of 4";

  // The same with the adapter told a rate above the acquirer's: refused searches.
  for (int i = 0; i < kCharges; ++i) {
    SetFaults(R"({"drop_rate": 1.0, "apply_to": ["capture", "replay"]})");
    ASSERT_EQ(Post(*api, "unpaced-" + std::to_string(i)).status(), 202u);
  }
  SetFaults("{}");
  RunReconciler({{"ACQUIRER_STRIPE_SEARCH_RATE_LIMIT", "1000"}, {"RECONCILER_CONCURRENCY", "16"},
                 {"ACQUIRER_STRIPE_EVENTS_PAGES", "0"}});
  EXPECT_NE(throttled(), "0");
}

// The window report over Stripe's listing (newest first, to the second, paged by starting_after): a
// PaymentIntent nobody of ours made is an orphan, one refunded behind our back a mismatch, the others match.
// A capture no charge of ours names (found by the window report) that a person refunds: a 500 Stripe stored
// under the refund's key is unknown, said so, never "refused"; asked again, the refund goes under a key of its
// own, and the money comes back exactly once whether or not the 500 had refunded it.
TEST_F(StripeDialectE2E, AnOrphansRefundAnswered500IsUnknownAndAskedAgainUnderAFreshKey) {
  StartAcquirer();
  const auto from = std::chrono::system_clock::now() - 2s;
  const std::string stranger = "ch_" + std::string(32, 'c');
  ASSERT_EQ(CreateIntentDirectly("lost-record", 900, stranger).status(), 200u);
  const auto to = std::chrono::system_clock::now() + 2s;
  std::this_thread::sleep_until(to + 1100ms);
  const auto window = RunProcess({RECONCILER_BIN, "window", "--from", util::FormatRfc3339(from), "--to",
                                  util::FormatRfc3339(to)},
                                 ReconcilerEnv(), 60s);
  ASSERT_EQ(window.exit_code, 0) << window.out << window.err;
  const auto pi = db_->Scalar("SELECT capture_id FROM orphan_captures WHERE status = 'open'");
  ASSERT_FALSE(pi.empty());
  const auto admin = [&](const std::string& by) {
    return RunProcess({CHARGE_ADMIN_BIN, "orphan", "void", pi, "--reason", "OPS-77: not a sale of ours", "--by", by},
                      ReconcilerEnv(), 60s);
  };
  // Every refund in the ledger (this is the only capture), and those under a second key.
  const auto refunds = [&](std::string_view key_prefix = "") {
    std::size_t n = 0;
    for (const auto& e : AcquirerLedger(*sim_client_)) {
      const auto& o = e.as_object();
      n += o.at("type").as_string() == "void" && o.at("idempotency_key").as_string().starts_with(key_prefix);
    }
    return n;
  };

  SetFaults(R"({"server_error_rate": 1.0, "apply_to": ["void"]})");
  const auto stored = admin("alice");
  EXPECT_EQ(stored.exit_code, 1) << stored.out << stored.err;
  EXPECT_THAT(stored.err, HasSubstr("whether it gave the money back is not known"));
  EXPECT_THAT(stored.err, Not(HasSubstr("refused")));
  EXPECT_EQ(db_->Scalar("SELECT status || ' ' || last_void_outcome FROM orphan_captures"), "open stored_error");
  const auto refunded_by_the_500 = refunds();

  SetFaults("{}");
  const auto again = admin("alice");
  ASSERT_EQ(again.exit_code, 0) << again.out << again.err;
  EXPECT_THAT(again.out, HasSubstr("voided " + pi));
  EXPECT_EQ(refunds(), 1u) << "the money came back once (" << refunded_by_the_500 << " under the 500)";
  EXPECT_EQ(refunds("refund2:"), 1u - refunded_by_the_500);
  EXPECT_EQ(db_->Scalar("SELECT status || ' ' || voids_recorded FROM orphan_captures"), "voided 2");
}

TEST_F(StripeDialectE2E, TheWindowReportReadsStripesListing) {
  StartAcquirer();
  auto api = StartApi();
  const auto from = std::chrono::system_clock::now() - 2s;
  for (const auto* key : {"w-1", "w-2", "w-3"}) ASSERT_EQ(Post(*api, key).status(), 201u) << key;
  const std::string stranger = "ch_" + std::string(32, 'b');
  ASSERT_EQ(CreateIntentDirectly("theirs", 700, stranger).status(), 200u);
  const auto refunded = sim_client_->Post("/v1/refunds", "payment_intent=" + Field("w-2", "acquirer_capture_id"),
                                          {{"Authorization", std::string("Bearer ") + kAcquirerKey},
                                           {"Content-Type", "application/x-www-form-urlencoded"},
                                           {"Idempotency-Key", "refund-behind-our-back"}});
  ASSERT_EQ(refunded.status(), 200u) << refunded.response.body();
  const auto to = std::chrono::system_clock::now() + 2s;
  std::this_thread::sleep_until(to + 1100ms);  // settled: the window closed a visibility window ago

  const auto run = RunProcess({RECONCILER_BIN, "window", "--from", util::FormatRfc3339(from), "--to",
                               util::FormatRfc3339(to)},
                              ReconcilerEnv({{"ACQUIRER_LIST_PAGE_LIMIT", "2"}}), 60s);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  const auto report = ParseWindowReport(run.out);
  EXPECT_TRUE(report.summary.at("complete").as_bool());
  EXPECT_TRUE(report.summary.at("settled").as_bool());
  EXPECT_EQ(report.summary.at("acquirer").at("captures").as_int64(), 4);
  EXPECT_EQ(report.summary.at("acquirer").at("pages").as_int64(), 2);
  std::multiset<std::string> found;
  for (const auto& d : report.discrepancies) {
    std::string entry(d.at("kind").as_string());
    if (const auto* fields = d.if_contains("fields")) {
      for (const auto& f : fields->as_array()) entry += ":" + std::string(f.as_string());
    }
    found.insert(entry + " " + std::string(d.contains("charge_id") ? d.at("charge_id").as_string()
                                                                   : d.at("reference").as_string()));
  }
  EXPECT_EQ(found, (std::multiset<std::string>{"mismatch:status " + Field("w-2", "charge_public_id(id)"),
                                               "capture_without_local_record " + stranger}))
      << run.out;
  EXPECT_EQ(report.summary.at("matched").as_int64(), 2);
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM orphan_captures WHERE status = 'open'"), "1");
}

}  // namespace
}  // namespace charge_outbox::testing
