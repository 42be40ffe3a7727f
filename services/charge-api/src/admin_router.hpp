// AdminRouter: what charge-api serves on its admin port: /healthz, /readyz and /metrics, with no API key.
// The port is for the kubelet and Prometheus, not for the internet: the API port answers 404 to these.
#pragma once

#include <boost/asio/awaitable.hpp>

#include "charge_api_probe.hpp"
#include "charge_outbox/http/server.hpp"
#include "charge_outbox/metrics/metrics.hpp"
#include "readiness.hpp"

namespace charge_outbox::charge_api {

// Thread-safe.
class AdminRouter {
 public:
  AdminRouter(Readiness& readiness, metrics::Registry& registry, ChargeApiProbe& probe);

  boost::asio::awaitable<http::Reply> Handle(http::Request request);

 private:
  struct Routed;
  boost::asio::awaitable<Routed> Route(const http::Request& request);

  Readiness& readiness_;
  metrics::Registry& registry_;
  ChargeApiProbe& probe_;
};

}  // namespace charge_outbox::charge_api
