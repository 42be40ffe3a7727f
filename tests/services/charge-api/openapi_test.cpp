// docs/openapi.yaml describes exactly the routes charge-api serves, with the statuses the contract names.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <set>
#include <string>
#include <vector>

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

}  // namespace
}  // namespace charge_outbox::charge_api
