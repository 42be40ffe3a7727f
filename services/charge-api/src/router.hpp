// Router: the HTTP surface of charge-api (spec section 3). It authenticates, checks the media type and
// the Idempotency-Key, parses the body, hands the work to ChargeService, and counts every request.
#pragma once

#include <boost/asio/awaitable.hpp>

#include <memory>

#include "api_key_cache.hpp"
#include "charge_api_probe.hpp"
#include "charge_outbox/db/database.hpp"
#include "charge_outbox/http/server.hpp"
#include "charge_outbox/metrics/metrics.hpp"
#include "charge_service.hpp"

namespace charge_outbox::charge_api {

// Thread-safe: Handle runs concurrently on every connection.
class Router {
 public:
  Router(ChargeService& service, ApiKeyCache& keys, db::Database& database, int schema_version,
         metrics::Registry& registry, ChargeApiProbe& probe);

  boost::asio::awaitable<http::Reply> Handle(http::Request request);

 private:
  struct Routed;
  boost::asio::awaitable<Routed> Route(const http::Request& request);
  boost::asio::awaitable<http::Response> Readiness();

  ChargeService& service_;
  ApiKeyCache& keys_;
  db::Database& database_;
  int schema_version_;
  metrics::Registry& registry_;
  ChargeApiProbe& probe_;
};

// Every route charge-api serves, as (method, path template): the list docs/openapi.yaml is checked against.
struct RouteSpec {
  const char* method;
  const char* path;
};
inline constexpr RouteSpec kRoutes[] = {
    {"post", "/v1/charges"}, {"get", "/v1/charges"}, {"get", "/v1/charges/{id}"},
    {"get", "/healthz"},     {"get", "/readyz"},     {"get", "/metrics"},
};

// True for "application/json" with any parameters (charset), in any letter case.
bool IsJsonMediaType(std::string_view content_type);

}  // namespace charge_outbox::charge_api
