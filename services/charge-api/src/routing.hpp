// What charge-api's two listeners share: the route table docs/openapi.yaml is checked against, the
// closed set of method labels, and the 405 every route answers to a method it does not serve.
#pragma once

#include <boost/beast/http/verb.hpp>

#include <string_view>

#include "charge_outbox/http/server.hpp"

namespace charge_outbox::charge_api {

// A route as (method, path template).
struct RouteSpec {
  const char* method;
  const char* path;
};
// The API port: exactly what docs/openapi.yaml documents.
inline constexpr RouteSpec kRoutes[] = {
    {"post", "/v1/charges"},
    {"get", "/v1/charges"},
    {"get", "/v1/charges/{id}"},
};
// The admin port (`admin.port`, docs/charge-api.md "Two ports"): probes and the scrape, never on the API port.
inline constexpr RouteSpec kAdminRoutes[] = {
    {"get", "/healthz"},
    {"get", "/readyz"},
    {"get", "/metrics"},
};

// The request counter's method label. A label value taken from the request must come from a closed set:
// any other method would create a series that lives as long as the process.
std::string_view MethodLabel(boost::beast::http::verb method);

// 405 problem+json with Allow.
http::Response MethodNotAllowed(const char* allow);

}  // namespace charge_outbox::charge_api
