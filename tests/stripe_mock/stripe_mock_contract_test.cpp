// The Stripe adapter's requests against stripe-mock, Stripe's own mock of its API, which checks each request
// against Stripe's OpenAPI spec (path, parameters and their types, authentication) and answers with fixtures.
// One test per request shape docs/stripe.md ("What the adapter sends") lists, each driving the real
// StripeAcquirerClient (MakeAcquirerClient, acquirer.kind stripe) and asserting that stripe-mock accepted
// every request the operation sent, with the parameters the doc names; and tests that show a refusal is seen
// as one. A RecordingProxy between the two keeps what was sent and what stripe-mock answered.
//
// stripe-mock is stateless: what its fixtures say (amounts, statuses) is not ours, so these tests check the
// requests, and of the answers only what the route alone decides (a listing is a page, a 200 proves the key,
// a succeeded refund is voided); tests/common/acquirer/stripe_classifier_test.cpp checks the readings.
// stripe-mock runs with -strict-version-check: a Stripe-Version other than its spec's is refused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/json.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "charge_outbox/acquirer/acquirer_client.hpp"
#include "charge_outbox/acquirer/retry_policy.hpp"
#include "charge_outbox/acquirer/stripe_acquirer_client.hpp"
#include "http_test_client.hpp"
#include "printers.hpp"
#include "recording_proxy.hpp"
#include "stripe_mock_server.hpp"

namespace charge_outbox::acquirer {
namespace {

namespace asio = boost::asio;
namespace json = boost::json;
using namespace std::chrono_literals;
using charge_outbox::testing::ProxiedExchange;
using charge_outbox::testing::RecordingProxy;
using charge_outbox::testing::StripeMockServer;
using charge_outbox::testing::Substitute;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::UnorderedElementsAre;

constexpr const char* kTestKey = "sk_test_123";  // stripe-mock takes any key of a test-mode form
constexpr const char* kChargeId = "ch_contract_1";

using Param = std::pair<std::string, std::string>;
using Params = std::vector<Param>;

std::string PercentDecode(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '+') {
      out += ' ';
    } else if (text[i] == '%' && i + 2 < text.size()) {
      out += static_cast<char>(std::stoi(std::string(text.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

// A query string or a form body, decoded: the names and values Stripe reads.
Params DecodeParams(std::string_view encoded) {
  Params params;
  while (!encoded.empty()) {
    const auto amp = encoded.find('&');
    const auto pair = encoded.substr(0, amp);
    const auto eq = pair.find('=');
    params.emplace_back(PercentDecode(pair.substr(0, eq)),
                        eq == std::string_view::npos ? "" : PercentDecode(pair.substr(eq + 1)));
    encoded = amp == std::string_view::npos ? std::string_view{} : encoded.substr(amp + 1);
  }
  return params;
}

std::string PathOf(const ProxiedExchange& e) { return e.target.substr(0, e.target.find('?')); }
Params QueryOf(const ProxiedExchange& e) {
  const auto q = e.target.find('?');
  return q == std::string::npos ? Params{} : DecodeParams(std::string_view(e.target).substr(q + 1));
}
std::vector<std::string> NamesOf(const Params& params) {
  std::vector<std::string> names;
  for (const auto& [name, value] : params) names.push_back(name);
  return names;
}
std::optional<std::string> ValueOf(const Params& params, const std::string& name) {
  for (const auto& [n, v] : params) {
    if (n == name) return v;
  }
  return std::nullopt;
}

// What a failure message needs: each request and stripe-mock's verdict, with its error message when it refused.
std::string Describe(const std::vector<ProxiedExchange>& exchanges) {
  std::ostringstream out;
  out << exchanges.size() << " request(s) reached stripe-mock:";
  for (const auto& e : exchanges) {
    out << "\n  " << e.method << ' ' << e.target;
    if (!e.body.empty()) out << "  body: " << e.body;
    out << "\n    -> " << e.status << (e.substituted ? " (answered by the test in stripe-mock's place)" : "");
    if (e.status / 100 != 2) out << ": " << e.answer;
  }
  return out.str();
}

std::int64_t Seconds(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

class StripeMockContract : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* binary = std::getenv("STRIPE_MOCK_BIN");
    // Never a skip: a run without stripe-mock would pass without checking the contract.
    ASSERT_TRUE(binary != nullptr && *binary != '\0')
        << "STRIPE_MOCK_BIN is not set: tests/run builds stripe-mock once into the project's cache "
           "(deploy/local/lib/stripe_mock.sh) and exports it; run tests/run, or export it yourself";
    ASSERT_TRUE(std::filesystem::exists(binary)) << "STRIPE_MOCK_BIN=" << binary << " does not exist";
    mock_ = std::make_unique<StripeMockServer>(binary);
    io_thread_ = std::thread([this] { io_.run(); });
  }

  void TearDown() override {
    client_.reset();
    work_.reset();
    if (io_thread_.joinable()) io_thread_.join();
    proxy_.reset();
    if (HasFailure() && mock_) std::cerr << "stripe-mock's output:\n" << mock_->Output() << '\n';
    mock_.reset();
  }

  // The adapter, through a RecordingProxy to this test's stripe-mock.
  AcquirerClient& Adapter(std::string api_key = kTestKey, Substitute substitute = {},
                          std::string api_version = StripeOptions{}.api_version) {
    proxy_ = std::make_unique<RecordingProxy>(mock_->port(), std::move(substitute));
    AcquirerClientConfig config;
    config.kind = AcquirerKind::kStripe;
    config.stripe.api_version = std::move(api_version);
    config.base_url = "http://127.0.0.1:" + std::to_string(proxy_->port());
    config.api_key = std::move(api_key);
    config.connect_timeout = 2s;
    config.request_timeout = 5s;
    config.max_connections = 4;
    client_ = MakeAcquirerClient(io_.get_executor(), std::move(config));
    return *client_;
  }

  template <typename T>
  T Await(asio::awaitable<T> awaitable) {
    auto future = asio::co_spawn(io_, std::move(awaitable), asio::use_future);
    if (future.wait_for(20s) != std::future_status::ready) {
      throw std::runtime_error("the adapter's call did not finish");
    }
    return future.get();
  }

  std::vector<ProxiedExchange> Exchanges() const { return proxy_->exchanges(); }

  // The outcome came from an answer stripe-mock accepted, and so did every request the operation sent.
  void ExpectAccepted(const AttemptOutcome& outcome) {
    const auto exchanges = Exchanges();
    // What the adapter made of stripe-mock's fixtures: not asserted (they are not ours), shown for the reader.
    std::cout << "outcome: " << ToString(outcome.kind) << ": " << outcome.detail << '\n';
    ASSERT_FALSE(exchanges.empty()) << "no request reached stripe-mock; outcome: " << ToString(outcome.kind) << ": "
                                    << outcome.detail;
    ASSERT_TRUE(outcome.http_status.has_value())
        << "no HTTP answer: " << ToString(outcome.kind) << ": " << outcome.detail << '\n'
        << Describe(exchanges);
    EXPECT_EQ(*outcome.http_status / 100, 2) << "outcome " << ToString(outcome.kind) << ": " << outcome.detail << '\n'
                                             << Describe(exchanges);
    for (const auto& e : exchanges) {
      EXPECT_EQ(e.status / 100, 2) << "stripe-mock refused " << e.method << ' ' << e.target << '\n'
                                   << Describe(exchanges);
    }
  }

  // The headers docs/stripe.md says every request carries.
  static void ExpectStripeHeaders(const ProxiedExchange& e, const std::string& api_key = kTestKey) {
    EXPECT_EQ(e.Header("Authorization"), "Bearer " + api_key) << e.method << ' ' << e.target;
    EXPECT_EQ(e.Header("Stripe-Version"), StripeOptions{}.api_version) << e.method << ' ' << e.target;
    EXPECT_EQ(e.Header("Accept"), "application/json") << e.method << ' ' << e.target;
    EXPECT_TRUE(e.Header("X-Request-Id").has_value()) << e.method << ' ' << e.target;
    if (e.method == "POST") {
      EXPECT_EQ(e.Header("Content-Type"), "application/x-www-form-urlencoded") << e.target;
    }
  }

  // The operation's only request, checked to be `method` `path` with the headers every request carries.
  std::optional<ProxiedExchange> OnlyRequest(const std::string& method, const std::string& path) const {
    const auto exchanges = Exchanges();
    if (exchanges.size() != 1) {
      ADD_FAILURE() << "expected one request, " << Describe(exchanges);
      return std::nullopt;
    }
    const auto& e = exchanges[0];
    EXPECT_EQ(e.method, method);
    EXPECT_EQ(PathOf(e), path);
    ExpectStripeHeaders(e);
    return e;
  }

  static CaptureRequest Capture() {
    return CaptureRequest{"contract-capture-key-1", 25000, "BRL", kChargeId, "pm_card_visa"};
  }
  static LookupRequest Lookup() {
    return LookupRequest{"contract-capture-key-1", ExpectedCapture{25000, "BRL", kChargeId},
                         std::chrono::system_clock::now() - 30s};
  }

  std::unique_ptr<StripeMockServer> mock_;
  std::unique_ptr<RecordingProxy> proxy_;
  asio::io_context io_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_{io_.get_executor()};
  std::thread io_thread_;
  std::unique_ptr<AcquirerClient> client_;
};

TEST_F(StripeMockContract, Capture) {
  auto& adapter = Adapter();
  const auto outcome = Await(adapter.Capture(Capture(), NewRequestId()));
  ExpectAccepted(outcome);
  const auto e = OnlyRequest("POST", "/v1/payment_intents");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->Header("Idempotency-Key"), "contract-capture-key-1");
  const auto form = DecodeParams(e->body);
  EXPECT_THAT(NamesOf(form), UnorderedElementsAre("amount", "currency", "payment_method", "confirm", "off_session",
                                                  "payment_method_types[]", "metadata[charge_id]", "expand[]"));
  EXPECT_EQ(ValueOf(form, "amount"), "25000");
  EXPECT_EQ(ValueOf(form, "currency"), "brl");
  EXPECT_EQ(ValueOf(form, "metadata[charge_id]"), kChargeId);
  EXPECT_EQ(ValueOf(form, "expand[]"), "latest_charge");
}

// stripe-mock's search always finds one PaymentIntent (one of its fixtures), so the lookup ends here.
TEST_F(StripeMockContract, LookupBySearch) {
  auto& adapter = Adapter();
  const auto outcome = Await(adapter.LookupByKey(Lookup(), NewRequestId()));
  ExpectAccepted(outcome);
  const auto exchanges = Exchanges();
  ASSERT_FALSE(exchanges.empty());
  const auto& e = exchanges[0];
  EXPECT_EQ(e.method, "GET");
  EXPECT_EQ(PathOf(e), "/v1/payment_intents/search");
  ExpectStripeHeaders(e);
  const auto query = QueryOf(e);
  EXPECT_THAT(NamesOf(query), UnorderedElementsAre("query", "limit", "expand[]"));
  EXPECT_EQ(ValueOf(query, "query"), "metadata['charge_id']:'" + std::string(kChargeId) + "'");
  EXPECT_EQ(ValueOf(query, "limit"), "10");
  EXPECT_EQ(ValueOf(query, "expand[]"), "data.latest_charge");
}

// The lookup's later routes: the search finds nothing, the events of the window are read page by page
// (starting_after) for our key, and the PaymentIntent an event names is read by id. stripe-mock checks each
// request; this test answers in its place (after it accepted) with what a real Stripe would have: an empty
// search, a first page of events that are not ours with more to come, then one whose request carried our key.
TEST_F(StripeMockContract, LookupByEventsThenPaymentIntent) {
  const auto lookup = Lookup();
  // stripe-mock's own PaymentIntent fixture, from its search answer. Owned by the proxy's substitute, which runs
  // on the proxy's thread and may outlive this body.
  auto stripe_mock_intent = std::make_shared<json::object>();
  Substitute substitute = [stripe_mock_intent, key = lookup.idempotency_key](
                              const ProxiedExchange& e) -> std::optional<std::string> {
    const auto path = PathOf(e);
    if (path == "/v1/payment_intents/search") {
      auto answer = json::parse(e.answer).as_object();
      *stripe_mock_intent = answer.at("data").as_array().at(0).as_object();
      answer["data"] = json::array{};
      answer["total_count"] = 0;
      return json::serialize(answer);
    }
    if (path != "/v1/events") return std::nullopt;
    auto answer = json::parse(e.answer).as_object();
    auto event = answer.at("data").as_array().at(0).as_object();  // stripe-mock's own event fixture
    event["type"] = "payment_intent.succeeded";
    auto intent = *stripe_mock_intent;
    const bool first_page = !ValueOf(QueryOf(e), "starting_after").has_value();
    if (first_page) {
      event["id"] = "evt_contract_someone_elses";
      event["request"] = json::object{{"id", "req_other"}, {"idempotency_key", "someone-elses-key"}};
      intent["id"] = "pi_contract_someone_elses";
    } else {
      event["id"] = "evt_contract_ours";
      event["request"] = json::object{{"id", "req_ours"}, {"idempotency_key", key}};
      intent["id"] = "pi_contract_ours";
    }
    event["data"] = json::object{{"object", intent}};
    answer["data"] = json::array{event};
    answer["has_more"] = first_page;
    return json::serialize(answer);
  };
  auto& adapter = Adapter(kTestKey, substitute);
  const auto outcome = Await(adapter.LookupByKey(lookup, NewRequestId()));
  ExpectAccepted(outcome);
  const auto exchanges = Exchanges();
  ASSERT_EQ(exchanges.size(), 4u) << "search, two pages of events, the PaymentIntent; " << Describe(exchanges);
  std::vector<std::string> routes;
  for (const auto& e : exchanges) {
    routes.push_back(e.method + " " + PathOf(e));
    ExpectStripeHeaders(e);
  }
  EXPECT_THAT(routes, ElementsAre("GET /v1/payment_intents/search", "GET /v1/events", "GET /v1/events",
                                  "GET /v1/payment_intents/pi_contract_ours"));

  const auto first_page = QueryOf(exchanges[1]);
  EXPECT_THAT(NamesOf(first_page), UnorderedElementsAre("types[]", "types[]", "created[gte]", "created[lte]", "limit"));
  EXPECT_THAT(first_page, Contains(Param{"types[]", "payment_intent.succeeded"}));
  EXPECT_THAT(first_page, Contains(Param{"types[]", "payment_intent.payment_failed"}));
  EXPECT_EQ(ValueOf(first_page, "limit"), "100");
  // How wide the window is the adapter's choice; it must hold the second the intent was created in.
  const auto created = Seconds(*lookup.intent_created_at);
  EXPECT_LE(std::stoll(ValueOf(first_page, "created[gte]").value_or("")), created);
  EXPECT_GE(std::stoll(ValueOf(first_page, "created[lte]").value_or("")), created);
  const auto second_page = QueryOf(exchanges[2]);
  EXPECT_EQ(ValueOf(second_page, "starting_after"), "evt_contract_someone_elses");
  EXPECT_THAT(NamesOf(second_page), UnorderedElementsAre("types[]", "types[]", "created[gte]", "created[lte]", "limit",
                                                         "starting_after"));
  EXPECT_THAT(QueryOf(exchanges[3]), ElementsAre(Param{"expand[]", "latest_charge"}));
  EXPECT_FALSE(exchanges[3].substituted) << "the PaymentIntent is stripe-mock's own answer";
}

TEST_F(StripeMockContract, Void) {
  auto& adapter = Adapter();
  const auto outcome = Await(adapter.Void(VoidRequest{"pi_contract_1", "contract-void-key-1"}, NewRequestId()));
  ExpectAccepted(outcome);
  EXPECT_EQ(outcome.kind, OutcomeKind::kVoided) << outcome.detail << " (stripe-mock's refund fixture is succeeded)";
  const auto e = OnlyRequest("POST", "/v1/refunds");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->Header("Idempotency-Key"), "refund:contract-void-key-1");  // Stripe has one key space
  const auto form = DecodeParams(e->body);
  EXPECT_EQ(ValueOf(form, "payment_intent"), "pi_contract_1");
  EXPECT_THAT(NamesOf(form), ElementsAre("payment_intent")) << "docs/stripe.md's refund body: the whole amount";
}

TEST_F(StripeMockContract, ListPage) {
  auto& adapter = Adapter();
  const auto now = std::chrono::system_clock::now();
  const ListWindow window{now - 2h, now - 1h, 50};
  const auto outcome = Await(adapter.ListPage(window, std::nullopt, NewRequestId()));
  ExpectAccepted(outcome);
  EXPECT_EQ(outcome.kind, OutcomeKind::kPage) << outcome.detail;
  const auto e = OnlyRequest("GET", "/v1/payment_intents");
  ASSERT_TRUE(e);
  const auto query = QueryOf(*e);
  EXPECT_THAT(NamesOf(query), UnorderedElementsAre("created[gte]", "created[lt]", "limit", "expand[]"));
  EXPECT_EQ(ValueOf(query, "created[gte]"), std::to_string(Seconds(window.created_from)));
  EXPECT_EQ(ValueOf(query, "created[lt]"),
            std::to_string(std::chrono::ceil<std::chrono::seconds>(window.created_to.time_since_epoch()).count()));
  EXPECT_EQ(ValueOf(query, "limit"), "50");
  EXPECT_EQ(ValueOf(query, "expand[]"), "data.latest_charge");
}

TEST_F(StripeMockContract, ListPageAfterToken) {
  auto& adapter = Adapter();
  const auto now = std::chrono::system_clock::now();
  const auto outcome =
      Await(adapter.ListPage(ListWindow{now - 2h, now - 1h, 100}, std::string("pi_contract_last"), NewRequestId()));
  ExpectAccepted(outcome);
  EXPECT_EQ(outcome.kind, OutcomeKind::kPage) << outcome.detail;
  const auto e = OnlyRequest("GET", "/v1/payment_intents");
  ASSERT_TRUE(e);
  const auto query = QueryOf(*e);
  EXPECT_THAT(NamesOf(query),
              UnorderedElementsAre("created[gte]", "created[lt]", "limit", "expand[]", "starting_after"));
  EXPECT_EQ(ValueOf(query, "starting_after"), "pi_contract_last");
}

TEST_F(StripeMockContract, CredentialCheck) {
  auto& adapter = Adapter();
  const auto check = Await(CheckCredentials(adapter));
  ExpectAccepted(check.outcome);
  EXPECT_EQ(check.verdict, Credentials::kAccepted) << check.outcome.detail;
  const auto e = OnlyRequest("GET", "/v1/payment_intents");
  ASSERT_TRUE(e);
  EXPECT_THAT(QueryOf(*e), ElementsAre(Param{"limit", "1"}));
}

// stripe-mock refuses a key that is not a test-mode secret key, as Stripe refuses a wrong one: the credential
// check says refused, a capture is a contract_error, and neither repeats the key stripe-mock echoes back.
TEST_F(StripeMockContract, RefusedKeyIsAContractError) {
  const std::string live_key = "sk_live_contract_not_for_tests";
  auto& adapter = Adapter(live_key);
  const auto check = Await(CheckCredentials(adapter));
  EXPECT_EQ(check.verdict, Credentials::kRefused) << check.outcome.detail;
  EXPECT_EQ(check.outcome.http_status, 401) << check.outcome.detail;

  const auto capture = Await(adapter.Capture(Capture(), NewRequestId()));
  EXPECT_EQ(capture.http_status, 401) << capture.detail;
  EXPECT_EQ(capture.kind, OutcomeKind::kContractError) << capture.detail;
  EXPECT_EQ(capture.evidence(), EvidenceClass::kUnknown);
  const auto exchanges = Exchanges();
  ASSERT_EQ(exchanges.size(), 2u) << Describe(exchanges);
  EXPECT_THAT(exchanges[1].answer, HasSubstr(live_key)) << "stripe-mock names the key in its error";
  EXPECT_THAT(capture.detail, Not(HasSubstr(live_key)));
  EXPECT_THAT(check.outcome.detail, Not(HasSubstr(live_key)));
}

// stripe-mock checks against one version of Stripe's spec and refuses another: an adapter asking for the
// version pinned before it (2024-06-20) is refused, and says contract_error.
TEST_F(StripeMockContract, OtherStripeVersionIsRefused) {
  auto& adapter = Adapter(kTestKey, {}, "2024-06-20");
  const auto capture = Await(adapter.Capture(Capture(), NewRequestId()));
  EXPECT_EQ(capture.http_status, 400) << capture.detail;
  EXPECT_EQ(capture.kind, OutcomeKind::kContractError) << capture.detail;
  const auto exchanges = Exchanges();
  ASSERT_EQ(exchanges.size(), 1u) << Describe(exchanges);
  EXPECT_THAT(exchanges[0].answer, HasSubstr("doesn't match version in OpenAPI specification"));
}

// The check can fail: the adapter's own capture, sent again by hand with one parameter Stripe does not define,
// is refused by stripe-mock with a 400.
TEST_F(StripeMockContract, UnknownParameterIsRefused) {
  auto& adapter = Adapter();
  ExpectAccepted(Await(adapter.Capture(Capture(), NewRequestId())));
  const auto sent = Exchanges().at(0);
  charge_outbox::testing::HttpHeaders headers;
  for (const auto& [name, value] : sent.headers) {
    if (!boost::beast::iequals(name, "Host") && !boost::beast::iequals(name, "Content-Length")) {
      headers.emplace_back(name, value);
    }
  }
  charge_outbox::testing::HttpTestClient raw(mock_->port());
  const auto accepted = raw.Post(sent.target, sent.body, headers);
  ASSERT_TRUE(accepted.ok()) << accepted.error.message();
  EXPECT_EQ(accepted.status(), 200u) << "the adapter's capture, replayed as it was: " << accepted.response.body();

  const auto refused = raw.Post(sent.target, sent.body + "&idempotency_key=contract-capture-key-1", headers);
  ASSERT_TRUE(refused.ok()) << refused.error.message();
  EXPECT_EQ(refused.status(), 400u) << refused.response.body();
  EXPECT_THAT(refused.response.body(), HasSubstr("additional properties are not allowed"));
}

}  // namespace
}  // namespace charge_outbox::acquirer
