// Router: the API port of charge-api (docs/charge-api.md, docs/openapi.yaml). It authenticates (answering 429
// to a client past its failed-authentication budget before any database lookup), applies the merchant's
// request rate, checks the media type and the Idempotency-Key, parses the body, hands the work to
// ChargeService, and counts every request. Probes and metrics are on the admin port (admin_router.hpp).
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/address.hpp>

#include <memory>
#include <string>
#include <variant>

#include "api_key_cache.hpp"
#include "charge_api_probe.hpp"
#include "charge_outbox/http/server.hpp"
#include "charge_service.hpp"
#include "routing.hpp"
#include "token_bucket.hpp"

namespace charge_outbox::charge_api {

// Thread-safe: Handle runs concurrently on every connection.
class Router {
 public:
  // failed_auth: per client address, spent by every key not known valid (given back if it is);
  // merchant_rate: per merchant, spent by every authenticated request.
  Router(ChargeService& service, ApiKeyCache& keys, KeyedLimiter& failed_auth, KeyedLimiter& merchant_rate,
         ChargeApiProbe& probe);

  boost::asio::awaitable<http::Reply> Handle(http::Request request, boost::asio::ip::address peer);

 private:
  struct Routed;
  boost::asio::awaitable<Routed> Route(const http::Request& request, const boost::asio::ip::address& peer);
  boost::asio::awaitable<std::variant<charges::Merchant, ApiError>> Authenticate(const std::string& api_key,
                                                                                const std::string& client);

  ChargeService& service_;
  ApiKeyCache& keys_;
  KeyedLimiter& failed_auth_;
  KeyedLimiter& merchant_rate_;
  ChargeApiProbe& probe_;
};


// True for "application/json" with any parameters (charset), in any letter case.
bool IsJsonMediaType(std::string_view content_type);

}  // namespace charge_outbox::charge_api
