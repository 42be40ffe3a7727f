// docs/openapi.yaml describes exactly the routes charge-api serves, with the statuses the contract names.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <boost/json/parse.hpp>

#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "api_responses.hpp"
#include "charge_request.hpp"
#include "router.hpp"

namespace charge_outbox::charge_api {
namespace {

using Route = std::pair<std::string, std::string>;

YAML::Node Document() { return YAML::LoadFile(OPENAPI_YAML); }

TEST(OpenApi, IsVersion31AndDocumentsExactlyTheServedRoutes) {
  const auto doc = Document();
  EXPECT_EQ(doc["openapi"].as<std::string>(), "3.1.0");
  std::set<Route> documented;
  for (const auto& path : doc["paths"]) {
    for (const auto& operation : path.second) {
      documented.emplace(operation.first.as<std::string>(), path.first.as<std::string>());
    }
  }
  std::set<Route> served;
  for (const auto& r : kRoutes) served.emplace(r.method, r.path);
  EXPECT_EQ(documented, served);
}

TEST(OpenApi, CreateChargeDocumentsEveryStatusOfTheContract) {
  const auto responses = Document()["paths"]["/v1/charges"]["post"]["responses"];
  std::set<std::string> statuses;
  for (const auto& r : responses) statuses.insert(r.first.as<std::string>());
  EXPECT_EQ(statuses,
            (std::set<std::string>{"201", "202", "400", "401", "402", "409", "413", "415", "422", "429", "431", "503"}));
}

TEST(OpenApi, RequestSchemaMatchesTheParserLimits) {
  const auto schema = Document()["components"]["schemas"]["ChargeRequest"];
  EXPECT_FALSE(schema["additionalProperties"].as<bool>());
  EXPECT_EQ(schema["properties"]["amount"]["maximum"].as<std::int64_t>(), kMaxAmount);
  EXPECT_EQ(schema["properties"]["order_id"]["maxLength"].as<std::size_t>(), kMaxIdentifierLength);
  EXPECT_EQ(schema["properties"]["description"]["maxLength"].as<std::size_t>(), kMaxDescriptionLength);
  std::vector<std::string> documented;
  for (const auto& code : schema["properties"]["currency"]["enum"]) documented.push_back(code.as<std::string>());
  const auto accepted = AcceptedCurrencies();
  EXPECT_EQ(documented, std::vector<std::string>(accepted.begin(), accepted.end()));
}

// The document is the API port: probes and the scrape are on the admin port and are not in it.
TEST(OpenApi, DocumentsNoAdminRoute) {
  const auto doc = Document();
  for (const auto& r : kAdminRoutes) EXPECT_FALSE(doc["paths"][r.path].IsDefined()) << r.path;
}

TEST(OpenApi, EveryChargeRouteDocumentsTheRateLimitsWithRetryAfter) {
  const auto doc = Document();
  for (const auto& r : kRoutes) {
    EXPECT_TRUE(doc["paths"][r.path][r.method]["responses"]["429"].IsDefined()) << r.method << " " << r.path;
  }
  EXPECT_TRUE(doc["components"]["responses"]["TooManyRequests"]["headers"]["Retry-After"].IsDefined());
}

TEST(OpenApi, EveryChargeRouteDocumentsTheDatabaseOutageAndEveryPathTheUndeclaredMethod) {
  const auto doc = Document();
  for (const auto& [method, path] : {Route{"post", "/v1/charges"}, Route{"get", "/v1/charges"},
                                     Route{"get", "/v1/charges/{id}"}}) {
    EXPECT_TRUE(doc["paths"][path][method]["responses"]["503"].IsDefined()) << method << " " << path;
  }
  EXPECT_TRUE(doc["components"]["responses"]["MethodNotAllowed"]["headers"]["Allow"].IsDefined());
}

// Issue 41, defect 1: every answer charge-api can give is in exactly one of the two lists of
// x-idempotency-key-answers (definitive for the key, or "retry with the same key or GET"), and the lists
// name nothing it cannot give.
TEST(OpenApi, EveryAnswerIsInExactlyOneListOfTheKeysAnswers) {
  const auto lists = Document()["x-idempotency-key-answers"];
  ASSERT_TRUE(lists.IsDefined());
  using Answer = std::pair<int, std::string>;  // status, problem type ("" for a charge body)
  std::map<Answer, std::vector<std::string>> listed;
  for (const auto* name : {"definitive", "retry-with-the-same-key-or-get"}) {
    for (const auto& a : lists[name]) {
      listed[{a["status"].as<int>(), a["type"] ? a["type"].as<std::string>() : ""}].push_back(name);
    }
  }
  std::set<Answer> given;
  const auto give = [&](const http::Response& r) {
    std::string type;
    if (r.result_int() >= 400 || r.result_int() == 402) {
      type = std::string(boost::json::parse(r.body()).at("type").as_string());
    }
    given.insert({static_cast<int>(r.result_int()), type});
  };
  for (const auto code : {ApiErrc::kMissingIdempotencyKey, ApiErrc::kMalformedIdempotencyKey, ApiErrc::kInvalidField,
                          ApiErrc::kApiKeyMissing, ApiErrc::kAuthSchemeNotBearer, ApiErrc::kApiKeyMalformed,
                          ApiErrc::kApiKeyUnknown, ApiErrc::kUnsupportedMediaType, ApiErrc::kNotFound,
                          ApiErrc::kMethodNotAllowed, ApiErrc::kIdempotencyKeyReused, ApiErrc::kRequestInFlight,
                          ApiErrc::kDatabaseUnavailable, ApiErrc::kTooManyFailedAuthentications,
                          ApiErrc::kRateLimited, ApiErrc::kAcquirerBusy, ApiErrc::kInternal}) {
    give(ToResponse(ApiError{code, "", "amount", std::chrono::seconds{1}, "ch_1"}));
  }
  charges::Charge c;
  c.id = "0f8fad5b-d9cb-469f-a165-70867728950e";
  for (const auto status : {charges::ChargeStatus::kCaptured, charges::ChargeStatus::kPending,
                            charges::ChargeStatus::kNeedsReview, charges::ChargeStatus::kFailed,
                            charges::ChargeStatus::kCanceled}) {
    c.status = status;
    give(ToHttp(ResponseFor(c), c.public_id(), false, std::chrono::seconds{1}));
  }
  c.status = charges::ChargeStatus::kFailed;
  c.decline_code = "card_declined";
  give(ToHttp(ResponseFor(c), c.public_id(), false, std::chrono::seconds{1}));
  // The HTTP server's own refusals, before any handler (ServerOptions::problem_type_prefix, which
  // charge-api sets to ours): a malformed request, a body or header too large, a handler that threw, and
  // behind a trusted proxy a client past its share of requests in flight.
  for (const auto& [status, slug] : std::vector<std::pair<int, const char*>>{{400, "malformed-request"},
                                                                            {413, "body-too-large"},
                                                                            {429, "too-many-requests-in-flight"},
                                                                            {431, "header-too-large"},
                                                                            {500, "internal"}}) {
    given.insert({status, ProblemType(slug)});
  }

  for (const auto& answer : given) {
    const auto it = listed.find(answer);
    ASSERT_NE(it, listed.end()) << answer.first << " " << answer.second << " is in neither list";
    EXPECT_EQ(it->second.size(), 1u) << answer.first << " " << answer.second << " is in both lists";
  }
  for (const auto& [answer, names] : listed) {
    EXPECT_TRUE(given.contains(answer)) << answer.first << " " << answer.second << " is listed but never given";
  }
  // The definitive ones, exactly: a capture, and the two ways of saying no money was kept.
  EXPECT_EQ(lists["definitive"].size(), 3u);
}

// Issue 43: every problem type is ours (the server's own 400, 413, 431 and 500 were about:blank), and the
// Problem schema says so, which the property test holds every answer's body to.
TEST(OpenApi, EveryProblemTypeIsOurs) {
  const auto doc = Document();
  for (const auto* name : {"definitive", "retry-with-the-same-key-or-get"}) {
    for (const auto& a : doc["x-idempotency-key-answers"][name]) {
      if (a["type"]) {
        EXPECT_THAT(a["type"].as<std::string>(), ::testing::StartsWith(kProblemTypePrefix));
      }
    }
  }
  const std::regex pattern(doc["components"]["schemas"]["Problem"]["properties"]["type"]["pattern"].as<std::string>());
  EXPECT_TRUE(std::regex_search(ProblemType("body-too-large"), pattern));
  EXPECT_FALSE(std::regex_search(std::string("about:blank"), pattern));
}

// Issue 43: the answers that ask the client to come back document the headers that say where and when.
TEST(OpenApi, A202DocumentsLocationAndRetryAfterAndA409ItsRetryAfter) {
  const auto responses = Document()["paths"]["/v1/charges"]["post"]["responses"];
  for (const auto* header : {"Location", "Retry-After"}) {
    EXPECT_TRUE(responses["202"]["headers"][header]["required"].as<bool>()) << header;
  }
  EXPECT_EQ(responses["202"]["headers"]["Retry-After"]["schema"]["minimum"].as<int>(), 1);
  EXPECT_TRUE(responses["409"]["headers"]["Retry-After"]["required"].as<bool>());
}

// Issue 43: every challenge charge-api sends with a 401 is one the document allows.
TEST(OpenApi, TheDocumentedChallengeAllowsEveryOneA401Sends) {
  const auto header = Document()["components"]["responses"]["Unauthorized"]["headers"]["WWW-Authenticate"];
  const std::regex pattern(header["schema"]["pattern"].as<std::string>());
  for (const auto code : {ApiErrc::kApiKeyMissing, ApiErrc::kAuthSchemeNotBearer, ApiErrc::kApiKeyMalformed,
                          ApiErrc::kApiKeyUnknown}) {
    const auto r = ToResponse(ApiError{code});
    const std::string challenge(r["WWW-Authenticate"]);
    EXPECT_TRUE(std::regex_search(challenge, pattern)) << challenge;
  }
}

}  // namespace
}  // namespace charge_outbox::charge_api
