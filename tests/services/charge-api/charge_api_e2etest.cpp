// charge-api as it runs: the real binary against a real PostgreSQL and the real acquirer-sim, driven over
// HTTP. Every row of the contract table (docs/charge-api.md, docs/openapi.yaml), concurrency across two
// instances, and a crash at every failpoint of the flow.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <csignal>
#include <filesystem>
#include <functional>
#include <latch>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "charge_stack.hpp"
#include "http_test_client.hpp"
#include "pg_test_database.hpp"
#include "service_process.hpp"
#include "test_env.hpp"

namespace charge_outbox::testing {
namespace {

namespace fs = std::filesystem;
namespace bhttp = boost::beast::http;
using namespace std::chrono_literals;
using ::testing::AnyOf;
using ::testing::HasSubstr;

constexpr const char* kMerchant1 = "00000000-0000-4000-8000-000000000001";
constexpr const char* kMerchant2 = "00000000-0000-4000-8000-000000000002";
constexpr const char* kApiKey1 = "sk_test_e2e_merchant_one";
constexpr const char* kApiKey2 = "sk_test_e2e_merchant_two";
constexpr const char* kAcquirerKey = "ak_test_e2e";

std::string ChargeBody(std::int64_t amount = 25000, const std::string& payment_method = "pm_tok_visa",
                       const std::string& order_id = "PED-0001") {
  return R"({"amount": )" + std::to_string(amount) + R"(, "currency": "BRL", "order_id": ")" + order_id +
         R"(", "payment_method": ")" + payment_method + R"(", "description": "pedido de teste"})";
}

HttpHeaders ChargeHeaders(const std::string& key, const char* api_key = kApiKey1) {
  return {{"Authorization", std::string("Bearer ") + api_key},
          {"Content-Type", "application/json"},
          {"Idempotency-Key", key}};
}

class ChargeApiE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = PgTestDatabase::Create(::testing::UnitTest::GetInstance()->current_test_info()->name(),
                                 PgTestDatabase::Schema::kMigrated);
    db_->Execute(std::string("INSERT INTO merchants (id, name) VALUES ('") + kMerchant1 + "', 'one'), ('" +
                 kMerchant2 + "', 'two')");
    db_->Execute(std::string("INSERT INTO api_keys (key_hash, merchant_id, key_prefix) VALUES "
                             "(sha256(convert_to('") + kApiKey1 + "', 'UTF8')), '" + kMerchant1 + "', 'sk_test_e2e'), "
                 "(sha256(convert_to('" + kApiKey2 + "', 'UTF8')), '" + kMerchant2 + "', 'sk_test_e2e')");
    dir_ = fs::temp_directory_path() / UniqueName("charge_api_e2e");
    sim_ = std::make_unique<ServiceProcess>(std::vector<std::string>{ACQUIRER_SIM_BIN},
                                            EnvChanges{{"HTTP_PORT", "0"},
                                                       {"DATA_DIR", (dir_ / "sim").string()},
                                                       {"AUTH_API_KEYS", kAcquirerKey}});
    sim_client_ = std::make_unique<HttpTestClient>(sim_->port());
    api_ = StartApi();
    client_ = std::make_unique<HttpTestClient>(api_->port(), "127.0.0.1", 30s);
  }

  void TearDown() override {
    client_.reset();
    api_.reset();
    sim_.reset();
    fs::remove_all(dir_);
  }

  std::unique_ptr<ServiceProcess> StartApi(EnvChanges extra = {}) {
    auto env = FastChargeApiEnv(db_->url(), sim_->port(), kAcquirerKey);
    for (auto& [k, v] : extra) env[k] = v;
    return std::make_unique<ServiceProcess>(std::vector<std::string>{CHARGE_API_BIN}, env);
  }

  HttpResult Post(const std::string& key, const std::string& body, const char* api_key = kApiKey1) {
    return client_->Post("/v1/charges", body, ChargeHeaders(key, api_key));
  }

  void SetFaults(const std::string& profile) {
    const auto r = sim_client_->Put("/admin/faults", profile);
    ASSERT_EQ(r.status(), 200u) << r.response.body();
  }

  boost::json::array Ledger() { return AcquirerLedger(*sim_client_); }

  std::size_t LedgerCaptures(const std::string& acquirer_key) {
    return AcquirerLedgerCount(*sim_client_, "capture", acquirer_key);
  }

  std::string TerminalEvents(const std::string& charge_id) {
    return db_->Scalar("SELECT count(*) FROM outbox WHERE aggregateid = '" + charge_id +
                       "' AND type <> 'payments.charge.initiated.v1'");
  }

  // A well-behaved client: the same key and body until a final answer, honouring Retry-After on 409 and
  // backing off on 202, 503 and a lost connection.
  HttpResult RetryLikeAClient(const std::string& key, const std::string& body, std::chrono::seconds deadline = 40s) {
    const auto until = std::chrono::steady_clock::now() + deadline;
    HttpResult last;
    while (std::chrono::steady_clock::now() < until) {
      HttpTestClient client(api_->port(), "127.0.0.1", 30s);
      last = client.Post("/v1/charges", body, ChargeHeaders(key));
      if (last.ok() && (last.status() == 201 || last.status() == 402)) return last;
      auto wait = 200ms;
      if (last.ok() && last.status() == 409) wait = std::chrono::seconds{std::stoi(last.header("Retry-After"))};
      std::this_thread::sleep_for(wait);
    }
    return last;
  }

  std::unique_ptr<PgTestDatabase> db_;
  fs::path dir_;
  std::unique_ptr<ServiceProcess> sim_;
  std::unique_ptr<HttpTestClient> sim_client_;
  std::unique_ptr<ServiceProcess> api_;
  std::unique_ptr<HttpTestClient> client_;
};

TEST_F(ChargeApiE2E, CapturedChargeIs201WithLocationAndOneCapture) {
  const auto r = Post("order-1", ChargeBody());
  ASSERT_TRUE(r.ok()) << r.error.message();
  ASSERT_EQ(r.status(), 201u) << r.response.body();
  const auto charge = r.json().as_object();
  EXPECT_EQ(charge.at("status").as_string(), "captured");
  EXPECT_EQ(charge.at("amount").as_int64(), 25000);
  EXPECT_EQ(r.header("Location"), "/v1/charges/" + std::string(charge.at("id").as_string()));
  EXPECT_TRUE(r.header("Idempotent-Replayed").empty());
  EXPECT_EQ(LedgerCaptures(std::string(kMerchant1) + ":order-1"), 1u);
  EXPECT_EQ(Ledger().at(0).at("reference").as_string(), charge.at("id").as_string());
  EXPECT_EQ(db_->Scalar("SELECT string_agg(type, ',' ORDER BY sequence) FROM outbox"),
            "payments.charge.initiated.v1,payments.charge.captured.v1");
}

TEST_F(ChargeApiE2E, DeclineIs402ProblemWithDeclineCodeAndChargeId) {
  const auto r = Post("declined-1", ChargeBody(25000, "pm_tok_declined"));
  ASSERT_EQ(r.status(), 402u) << r.response.body();
  EXPECT_EQ(r.header("Content-Type"), "application/problem+json");
  const auto p = r.json().as_object();
  EXPECT_EQ(p.at("decline_code").as_string(), "card_declined");
  EXPECT_THAT(std::string(p.at("charge_id").as_string()), HasSubstr("ch_"));
  EXPECT_TRUE(Ledger().empty());
  EXPECT_EQ(db_->Scalar("SELECT status FROM charges"), "failed");
}

TEST_F(ChargeApiE2E, UnknownOutcomeIs202PendingAndGetShowsIt) {
  // Issue 43: the 202 says where to look and when: a retry takes the released charge over at once, but
  // not sooner than the longest pause of charge-api's own acquirer retries (3 s here).
  client_.reset();
  api_ = StartApi({{"ACQUIRER_RETRY_BACKOFF_MAX", "3s"}, {"SHUTDOWN_DEADLINE", "5s"}});
  client_ = std::make_unique<HttpTestClient>(api_->port(), "127.0.0.1", 30s);
  SetFaults(R"({"timeout_rate": 1.0, "timeout_delay_ms": 3000})");
  const auto r = Post("slow-1", ChargeBody());
  ASSERT_EQ(r.status(), 202u) << r.response.body();
  const auto charge = r.json().as_object();
  EXPECT_EQ(charge.at("status").as_string(), "pending");
  const auto id = std::string(charge.at("id").as_string());
  EXPECT_EQ(r.header("Location"), "/v1/charges/" + id);
  EXPECT_EQ(r.header("Retry-After"), "3");
  const auto got = client_->Get("/v1/charges/" + id, {{"Authorization", std::string("Bearer ") + kApiKey1}});
  ASSERT_EQ(got.status(), 200u);
  EXPECT_EQ(got.json().at("status").as_string(), "pending");
  // Each attempt is on record with what it proved.
  EXPECT_EQ(db_->Scalar("SELECT count(*) > 0 AND bool_and(evidence = 'unknown' AND outcome = 'timed_out') "
                        "FROM acquirer_attempts"),
            "t");
}

TEST_F(ChargeApiE2E, RepeatIsReplayedByteForByteWithReplayHeader) {
  const auto first = Post("replay-1", ChargeBody());
  ASSERT_EQ(first.status(), 201u);
  const auto again = Post("replay-1", ChargeBody());
  EXPECT_EQ(again.status(), 201u);
  EXPECT_EQ(again.response.body(), first.response.body());
  EXPECT_EQ(again.header("Idempotent-Replayed"), "true");
  EXPECT_EQ(again.header("Location"), first.header("Location"));
  const auto declined = Post("replay-2", ChargeBody(100, "pm_tok_insufficient"));
  const auto declined_again = Post("replay-2", ChargeBody(100, "pm_tok_insufficient"));
  EXPECT_EQ(declined_again.status(), 402u);
  EXPECT_EQ(declined_again.response.body(), declined.response.body());
  EXPECT_EQ(declined_again.header("Idempotent-Replayed"), "true");
  EXPECT_EQ(LedgerCaptures(std::string(kMerchant1) + ":replay-1"), 1u);
}

TEST_F(ChargeApiE2E, RepeatWhileFirstInFlightIs409WithRetryAfter) {
  SetFaults(R"({"latency": {"distribution": "fixed", "ms": 700}})");  // under the 1 s acquirer timeout
  std::thread first([&] {
    HttpTestClient c(api_->port(), "127.0.0.1", 30s);
    EXPECT_EQ(c.Post("/v1/charges", ChargeBody(), ChargeHeaders("inflight-1")).status(), 201u);
  });
  ASSERT_TRUE(Eventually([&] { return db_->Scalar("SELECT count(*) FROM charges") == "1"; }));
  const auto r = Post("inflight-1", ChargeBody());
  first.join();
  EXPECT_EQ(r.status(), 409u) << r.response.body();
  EXPECT_EQ(r.header("Content-Type"), "application/problem+json");
  // Issue 43: when the first request's run should be over (its call started under 0.7 s ago, and a run
  // lasts at most the 1 s timeout plus the 1 s budget), not the whole 3 s lease as before.
  EXPECT_GE(std::stoi(r.header("Retry-After")), 1);
  EXPECT_LE(std::stoi(r.header("Retry-After")), 2);
  EXPECT_EQ(LedgerCaptures(std::string(kMerchant1) + ":inflight-1"), 1u);
}

TEST_F(ChargeApiE2E, SameKeyOtherParametersIs422AndChargesNothing) {
  SetFaults(R"({"timeout_rate": 1.0, "timeout_delay_ms": 3000})");
  ASSERT_EQ(Post("reuse-1", ChargeBody(100)).status(), 202u);
  SetFaults("{}");
  const auto r = Post("reuse-1", ChargeBody(999));
  EXPECT_EQ(r.status(), 422u) << r.response.body();
  EXPECT_EQ(r.header("Content-Type"), "application/problem+json");
  // The timed-out capture of the first request may have landed; the 422 added nothing.
  const auto before = Ledger().size();
  EXPECT_EQ(Post("reuse-1", ChargeBody(999)).status(), 422u);
  EXPECT_EQ(Ledger().size(), before);
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM charges"), "1");
}

TEST_F(ChargeApiE2E, TwoMerchantsWithTheSameKeyGetIndependentCharges) {
  const auto a = Post("shared-key", ChargeBody(100));
  const auto b = Post("shared-key", ChargeBody(200), kApiKey2);
  ASSERT_EQ(a.status(), 201u);
  ASSERT_EQ(b.status(), 201u);
  EXPECT_NE(a.json().at("id"), b.json().at("id"));
  EXPECT_EQ(LedgerCaptures(std::string(kMerchant1) + ":shared-key"), 1u);
  EXPECT_EQ(LedgerCaptures(std::string(kMerchant2) + ":shared-key"), 1u);
  // Neither merchant can see the other's charge, by id or by key.
  const auto id_a = std::string(a.json().at("id").as_string());
  EXPECT_EQ(client_->Get("/v1/charges/" + id_a, {{"Authorization", std::string("Bearer ") + kApiKey2}}).status(),
            404u);
  const auto by_key = client_->Get("/v1/charges?idempotency_key=shared-key",
                                   {{"Authorization", std::string("Bearer ") + kApiKey2}});
  ASSERT_EQ(by_key.status(), 200u);
  EXPECT_EQ(by_key.json().at("id"), b.json().at("id"));
  EXPECT_EQ(client_->Get("/v1/charges?idempotency_key=nope", {{"Authorization", std::string("Bearer ") + kApiKey1}})
                .status(),
            404u);
}

TEST_F(ChargeApiE2E, BadRequestsAreRefusedWithProblemJsonAndChangeNothing) {
  const auto missing_key = client_->Post("/v1/charges", ChargeBody(),
                                         {{"Authorization", std::string("Bearer ") + kApiKey1},
                                          {"Content-Type", "application/json"}});
  EXPECT_EQ(missing_key.status(), 400u);
  EXPECT_EQ(Post(std::string(256, 'k'), ChargeBody()).status(), 400u);
  EXPECT_EQ(Post("has space", ChargeBody()).status(), 400u);

  const std::pair<std::string, std::string> bad_bodies[] = {
      {R"({"amount": 0, "currency": "BRL", "order_id": "o", "payment_method": "p"})", "amount"},
      {R"({"amount": 10, "currency": "brl", "order_id": "o", "payment_method": "p"})", "currency"},
      {R"({"amount": 10, "currency": "BRL", "payment_method": "p"})", "order_id"},
      {R"({"amount": 10, "currency": "BRL", "order_id": "o", "payment_method": "p", "extra": 1})", "extra"},
      {R"({"amount": 10, "currency": "BRL", "order_id": "o")", "body"},
  };
  for (const auto& [body, field] : bad_bodies) {
    const auto r = Post("bad-body", body);
    EXPECT_EQ(r.status(), 400u) << body;
    EXPECT_EQ(r.header("Content-Type"), "application/problem+json");
    EXPECT_EQ(r.json().at("field").as_string(), field) << body;
    EXPECT_THAT(std::string(r.json().at("detail").as_string()),
                HasSubstr("Nothing was stored for this request under its Idempotency-Key")) << body;
  }

  EXPECT_EQ(Post("no-auth", ChargeBody(), "sk_test_unknown").status(), 401u);
  const auto no_auth = client_->Post("/v1/charges", ChargeBody(),
                                     {{"Content-Type", "application/json"}, {"Idempotency-Key", "x"}});
  EXPECT_EQ(no_auth.status(), 401u);

  const auto text = client_->Post("/v1/charges", ChargeBody(),
                                  {{"Authorization", std::string("Bearer ") + kApiKey1},
                                   {"Content-Type", "text/plain"},
                                   {"Idempotency-Key", "text-1"}});
  EXPECT_EQ(text.status(), 415u);

  HttpTestClient big(api_->port());
  const auto too_large = big.Post("/v1/charges", std::string(17 * 1024, ' ') + ChargeBody(), ChargeHeaders("big-1"));
  EXPECT_EQ(too_large.status(), 413u);
  EXPECT_EQ(too_large.json().at("type").as_string(), "urn:charge-outbox:problem:body-too-large");

  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM charges"), "0");
  EXPECT_TRUE(Ledger().empty());
  // What the 400s said holds: the key they refused is free, and the fixed request takes it.
  const auto fixed = Post("bad-body", ChargeBody());
  EXPECT_EQ(fixed.status(), 201u) << fixed.response.body();
  EXPECT_TRUE(fixed.header("Idempotent-Replayed").empty());
}

// Issue 43: a 401 tells missing, malformed and unknown credentials apart (type and RFC 6750 challenge),
// and an unknown key and a revoked one get the same bytes: no answer tells which keys exist.
TEST_F(ChargeApiE2E, UnauthorizedSaysWhichCredentialsWereWrongButNotWhichKeysExist) {
  db_->Execute(std::string("INSERT INTO api_keys (key_hash, merchant_id, key_prefix, revoked_at) VALUES "
                           "(sha256(convert_to('sk_test_e2e_revoked', 'UTF8')), '") +
               kMerchant1 + "', 'sk_test_rev', now() - interval '1 minute')");
  const auto post = [&](std::optional<std::string> authorization) {
    HttpHeaders headers{{"Content-Type", "application/json"}, {"Idempotency-Key", "auth-1"}};
    if (authorization) headers.emplace_back("Authorization", *authorization);
    return client_->Post("/v1/charges", ChargeBody(), headers);
  };
  struct Case {
    std::optional<std::string> authorization;
    const char* type;
    const char* challenge;
  };
  const Case cases[] = {
      {std::nullopt, "api-key-missing", "Bearer"},
      {"Basic dXNlcjpwYXNz", "api-key-malformed", "Bearer"},
      {"Bearer two words", "api-key-malformed", R"(Bearer error="invalid_token", error_description="malformed API key")"},
      {"Bearer sk_test_e2e_unknown", "api-key-unknown",
       R"(Bearer error="invalid_token", error_description="unknown or revoked API key")"},
  };
  for (const auto& c : cases) {
    const auto r = post(c.authorization);
    EXPECT_EQ(r.status(), 401u) << c.type;
    EXPECT_EQ(r.json().at("type").as_string(), std::string("urn:charge-outbox:problem:") + c.type);
    EXPECT_EQ(r.header("WWW-Authenticate"), c.challenge) << c.type;
  }
  const auto unknown = post("Bearer sk_test_e2e_unknown");
  const auto revoked = post("Bearer sk_test_e2e_revoked");
  EXPECT_EQ(revoked.status(), 401u);
  EXPECT_EQ(revoked.response.body(), unknown.response.body());
  EXPECT_EQ(revoked.header("WWW-Authenticate"), unknown.header("WWW-Authenticate"));
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM charges"), "0");
}

// Issue 43: the server's own refusals, answered before any handler, carry a problem type of ours (they
// were about:blank).
TEST_F(ChargeApiE2E, TheServersOwnRefusalsCarryProblemTypesOfOurs) {
  const auto type = [](const HttpResult& r) {
    return r.ok() ? std::string(r.json().at("type").as_string()) : r.error.message();
  };
  const auto malformed = HttpTestClient(api_->port()).SendRaw("GET /v1/charges HTTP/1.1\r\nHost x\r\n\r\n");
  EXPECT_EQ(malformed.status(), 400u);
  EXPECT_EQ(type(malformed), "urn:charge-outbox:problem:malformed-request");
  HttpHeaders big_header = ChargeHeaders("big-header");
  big_header.emplace_back("traceparent", std::string(9 * 1024, 'a'));
  const auto too_large = HttpTestClient(api_->port()).Post("/v1/charges", ChargeBody(), big_header);
  EXPECT_EQ(too_large.status(), 431u);
  EXPECT_EQ(type(too_large), "urn:charge-outbox:problem:header-too-large");
  const auto no_route = client_->Get("/v2/charges");
  EXPECT_EQ(no_route.status(), 404u);
  EXPECT_EQ(type(no_route), "urn:charge-outbox:problem:not-found");
}

// Corners a review found (issue 14, defect 7): each is a 400 naming its field, and nothing is written.
TEST_F(ChargeApiE2E, OddBytesAndNonMoneyCurrenciesAre400NotA503OrATruncatedRow) {
  const std::pair<std::string, std::string> bad_bodies[] = {
      // NUL cannot be stored in a text column: the row would differ from the request fingerprinted.
      {R"({"amount": 10, "currency": "BRL", "order_id": "o", "payment_method": "p", "description": "a\u0000b"})",
       "description"},
      {R"({"amount": 10, "currency": "BRL", "order_id": "o", "payment_method": "p", "description": "bell\u0007"})",
       "description"},
      // Three capital letters, but no money moves in them.
      {R"({"amount": 10, "currency": "XXX", "order_id": "o", "payment_method": "p"})", "currency"},
      {R"({"amount": 10, "currency": "XTS", "order_id": "o", "payment_method": "p"})", "currency"},
      {R"({"amount": 10, "currency": "XAU", "order_id": "o", "payment_method": "p"})", "currency"},
      {R"({"amount": 10, "currency": "CLF", "order_id": "o", "payment_method": "p"})", "currency"},
  };
  for (const auto& [body, field] : bad_bodies) {
    const auto r = Post("odd-body", body);
    EXPECT_EQ(r.status(), 400u) << body;
    EXPECT_EQ(r.json().at("field").as_string(), field) << body;
  }
  const auto lines = Post("multi-line", R"({"amount": 10, "currency": "BRL", "order_id": "o", "payment_method": "p", "description": "line 1\nline 2\ttab"})");
  EXPECT_EQ(lines.status(), 201u) << lines.response.body();
  EXPECT_EQ(db_->Scalar("SELECT description FROM charges WHERE idempotency_key = 'multi-line'"), "line 1\nline 2\ttab");

  // Not valid UTF-8, so the database would refuse it: checked first, as the header is.
  for (const char* key : {"%FF", "%00", "a%20b", ""}) {
    const auto r = client_->Get(std::string("/v1/charges?idempotency_key=") + key,
                                {{"Authorization", std::string("Bearer ") + kApiKey1}});
    EXPECT_EQ(r.status(), 400u) << key;
    EXPECT_EQ(r.header("Content-Type"), "application/problem+json") << key;
  }
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM charges"), "1");
}

// Every method a path does not declare in docs/openapi.yaml is a 405 naming the declared ones.
TEST_F(ChargeApiE2E, UndeclaredMethodsAre405WithAllowAsTheOpenApiDocumentDeclares) {
  const auto doc = YAML::LoadFile(std::string(PROJECT_ROOT) + "/docs/openapi.yaml");
  for (const auto& path : doc["paths"]) {
    std::set<std::string> declared;
    for (const auto& operation : path.second) {
      auto method = operation.first.as<std::string>();
      std::transform(method.begin(), method.end(), method.begin(), [](unsigned char c) { return std::toupper(c); });
      declared.insert(method);
    }
    auto target = path.first.as<std::string>();
    if (const auto at = target.find("{id}"); at != std::string::npos) target.replace(at, 4, "ch_" + std::string(32, 'a'));
    for (const auto method : {bhttp::verb::trace, bhttp::verb::put, bhttp::verb::delete_, bhttp::verb::patch,
                              bhttp::verb::options, bhttp::verb::post, bhttp::verb::get}) {
      const std::string name(bhttp::to_string(method));
      if (declared.contains(name)) continue;
      const auto r = client_->Send(method, target, {}, {{"Authorization", std::string("Bearer ") + kApiKey1}});
      EXPECT_EQ(r.status(), 405u) << name << " " << target;
      std::set<std::string> allowed;
      std::stringstream allow(r.header("Allow"));
      for (std::string m; std::getline(allow >> std::ws, m, ',');) allowed.insert(m);
      EXPECT_EQ(allowed, declared) << name << " " << target << ": Allow: " << r.header("Allow");
    }
  }
}

// The admin port's routes answer any method but GET with 405 too.
TEST_F(ChargeApiE2E, AdminRoutesAnswerUndeclaredMethodsWith405AllowGet) {
  HttpTestClient admin(api_->admin_port());
  for (const char* target : {"/healthz", "/readyz", "/metrics"}) {
    for (const auto method : {bhttp::verb::trace, bhttp::verb::put, bhttp::verb::delete_, bhttp::verb::post}) {
      const auto r = admin.Send(method, target);
      EXPECT_EQ(r.status(), 405u) << bhttp::to_string(method) << " " << target;
      EXPECT_EQ(r.header("Allow"), "GET") << target;
    }
  }
}

// The request counter's labels come from closed sets: an invented method cannot create a series.
TEST_F(ChargeApiE2E, AnInventedMethodIsCountedAsOtherNotByItsName) {
  HttpTestClient raw(api_->admin_port());
  const auto r = raw.SendRaw("BREW /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
  ASSERT_TRUE(r.ok()) << r.error.message();
  EXPECT_EQ(r.status(), 405u);
  const auto text = HttpTestClient(api_->admin_port()).Get("/metrics").response.body();
  EXPECT_THAT(text, HasSubstr(R"(charge_api_http_requests_total{method="other",route="/healthz",status="405"} 1)"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("BREW")));
}

// Probes and the scrape are on the admin port (docs/charge-api.md, "Two ports"); the API port answers them 404.
TEST_F(ChargeApiE2E, HealthReadinessAndMetricsOnTheAdminPortOnly) {
  ASSERT_NE(api_->admin_port(), 0) << api_->Output();
  ASSERT_NE(api_->admin_port(), api_->port());
  HttpTestClient admin(api_->admin_port());
  EXPECT_EQ(admin.Get("/healthz").status(), 200u);
  EXPECT_EQ(admin.Get("/readyz").status(), 200u);
  for (const char* target : {"/healthz", "/readyz", "/metrics"}) {
    const auto on_api = client_->Get(target);
    EXPECT_EQ(on_api.status(), 404u) << target;
    EXPECT_THAT(on_api.response.body(), ::testing::Not(HasSubstr("charge_api_"))) << target;
  }
  EXPECT_EQ(admin.Get("/v1/charges?idempotency_key=x", {{"Authorization", std::string("Bearer ") + kApiKey1}}).status(),
            404u);
  ASSERT_EQ(Post("metrics-1", ChargeBody()).status(), 201u);
  const auto metrics = admin.Get("/metrics");
  ASSERT_EQ(metrics.status(), 200u);
  const auto& text = metrics.response.body();
  EXPECT_THAT(text, HasSubstr(R"(charge_api_http_requests_total{method="POST",route="/v1/charges",status="201"} 1)"));
  EXPECT_THAT(text, HasSubstr(R"(charge_api_charges_total{outcome="captured"} 1)"));
  EXPECT_THAT(text, HasSubstr("charge_api_acquirer_call_duration_seconds_bucket"));
  EXPECT_THAT(text, HasSubstr("charges_pending_overdue"));
}

TEST_F(ChargeApiE2E, ConcurrentIdenticalRequestsAcrossTwoInstancesCaptureOnce) {
  SetFaults(R"({"latency": {"distribution": "fixed", "ms": 500}})");
  auto second = StartApi();
  constexpr int kRequests = 32;
  std::latch start(kRequests);
  std::mutex m;
  std::vector<unsigned> statuses;
  std::vector<std::string> created_bodies;
  std::vector<std::thread> threads;
  for (int i = 0; i < kRequests; ++i) {
    threads.emplace_back([&, i] {
      HttpTestClient c(i % 2 == 0 ? api_->port() : second->port(), "127.0.0.1", 30s);
      start.arrive_and_wait();
      const auto r = c.Post("/v1/charges", ChargeBody(), ChargeHeaders("race-1"));
      std::lock_guard lock(m);
      statuses.push_back(r.ok() ? r.status() : 0);
      if (r.ok() && r.status() == 201) created_bodies.push_back(r.response.body());
    });
  }
  for (auto& t : threads) t.join();
  for (const auto s : statuses) EXPECT_THAT(s, AnyOf(201u, 409u));
  ASSERT_FALSE(created_bodies.empty());
  for (const auto& body : created_bodies) EXPECT_EQ(body, created_bodies.front());
  EXPECT_EQ(LedgerCaptures(std::string(kMerchant1) + ":race-1"), 1u);
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM charges"), "1");
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM outbox"), "2");
}

TEST_F(ChargeApiE2E, DatabaseDownBeforeTheIntentIs503AndNothingIsSent) {
  // Warm the API key cache, then take the database away from this instance.
  ASSERT_EQ(client_->Get("/v1/charges?idempotency_key=warm", {{"Authorization", std::string("Bearer ") + kApiKey1}})
                .status(),
            404u);
  db_->ExecuteAsAdmin("ALTER DATABASE " + db_->name() + " ALLOW_CONNECTIONS false");
  db_->ExecuteAsAdmin("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '" + db_->name() + "'");
  const auto r = Post("down-1", ChargeBody());
  EXPECT_EQ(r.status(), 503u) << r.response.body();
  EXPECT_EQ(r.header("Retry-After"), "1");
  EXPECT_TRUE(Ledger().empty());
  const auto not_ready = HttpTestClient(api_->admin_port()).Get("/readyz");
  EXPECT_EQ(not_ready.status(), 503u);
  EXPECT_EQ(not_ready.json().at("type").as_string(), "urn:charge-outbox:problem:not-ready");
}

// The literal outage: charge-api's own PostgreSQL server is stopped while it runs.
TEST_F(ChargeApiE2E, PostgresStoppedBeforeTheIntentIs503AndNothingIsSent) {
  const auto state = dir_ / "own-postgres";
  fs::create_directories(state);
  fs::permissions(dir_, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                            fs::perms::others_read | fs::perms::others_exec);
  fs::permissions(state, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                             fs::perms::others_read | fs::perms::others_exec);
  const std::string lib = std::string(PROJECT_ROOT) + "/deploy/local/lib";
  auto shell = [&](const std::string& script) {
    return RunProcess({"/bin/bash", "-c",
                       "set -euo pipefail; source " + lib + "/common.sh; source " + lib + "/postgres.sh; " + script},
                      {}, 120s);
  };
  // Stopped however the test ends, so a failed assertion leaves no server behind.
  struct StopOnExit {
    std::function<void()> stop;
    ~StopOnExit() { stop(); }
  } stop_on_exit{[&] { shell("pg_stop " + state.string()); }};
  const auto started = shell("port=$(free_port); pg_start " + state.string() + " $port fast; echo $port");
  ASSERT_EQ(started.exit_code, 0) << started.err;
  const auto port = started.out.substr(0, started.out.find('\n'));
  const auto url = "postgresql://postgres@127.0.0.1:" + port + "/postgres";
  ASSERT_EQ(RunProcess({CHARGE_MIGRATE_BIN, "up"}, {{"DATABASE_URL", url}}).exit_code, 0);
  ASSERT_EQ(RunProcess({"/usr/bin/psql", "-X", "-q", url, "-c",
                        std::string("INSERT INTO merchants (id, name) VALUES ('") + kMerchant1 +
                            "', 'one'); INSERT INTO api_keys (key_hash, merchant_id, key_prefix) VALUES "
                            "(sha256(convert_to('" + kApiKey1 + "', 'UTF8')), '" + kMerchant1 + "', 'sk')"})
                .exit_code,
            0);
  api_ = StartApi({{"DATABASE_URL", url}});
  client_ = std::make_unique<HttpTestClient>(api_->port(), "127.0.0.1", 30s);
  ASSERT_EQ(Post("before-outage", ChargeBody()).status(), 201u);  // also caches the API key

  ASSERT_EQ(shell("pg_stop " + state.string()).exit_code, 0);
  const auto r = Post("during-outage", ChargeBody());
  EXPECT_EQ(r.status(), 503u) << r.response.body();
  EXPECT_EQ(r.header("Retry-After"), "1");
  EXPECT_EQ(LedgerCaptures(std::string(kMerchant1) + ":during-outage"), 0u);
  EXPECT_EQ(Ledger().size(), 1u);
}

class ChargeApiCrashE2E : public ChargeApiE2E, public ::testing::WithParamInterface<const char*> {};

TEST_P(ChargeApiCrashE2E, CrashAtFailpointLosesNothingAndChargesOnce) {
  api_ = StartApi({{"FAILPOINTS", std::string(GetParam()) + "=crash"}});
  client_ = std::make_unique<HttpTestClient>(api_->port(), "127.0.0.1", 30s);
  const auto crashed = Post("crash-1", ChargeBody());
  EXPECT_FALSE(crashed.ok()) << "the request should die with the process, got " << crashed.status();
  const auto exit = api_->process().Wait(10s);
  EXPECT_EQ(exit.term_signal, SIGKILL);

  api_ = StartApi();
  const auto r = RetryLikeAClient("crash-1", ChargeBody());
  ASSERT_TRUE(r.ok()) << r.error.message() << "\n" << api_->Output();
  ASSERT_EQ(r.status(), 201u) << r.response.body();
  const auto id = std::string(r.json().at("id").as_string());
  EXPECT_EQ(LedgerCaptures(std::string(kMerchant1) + ":crash-1"), 1u);
  EXPECT_EQ(TerminalEvents(id), "1");
  EXPECT_EQ(db_->Scalar("SELECT status FROM charges"), "captured");
}

INSTANTIATE_TEST_SUITE_P(Failpoints, ChargeApiCrashE2E,
                         ::testing::Values("charge.before_intent_commit", "charge.after_intent_commit",
                                           "charge.after_acquirer_response"),
                         [](const auto& param_info) {
                           std::string name = param_info.param;
                           for (auto& c : name) c = c == '.' ? '_' : c;
                           return name;
                         });

}  // namespace
}  // namespace charge_outbox::testing
