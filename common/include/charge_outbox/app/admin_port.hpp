// The admin port of a daemon without an API router of its own (outbox-relay, settlement-projection):
// `/metrics` (the registry, Prometheus text), `/healthz` and `/readyz`, GET only (any other method is a
// 405 naming GET), anything else a 404. What alive and ready mean is each daemon's; the answers' shape is
// shared: `{"status": "..."}`, 200 when the check holds and 503 when it does not.
#pragma once

#include <boost/asio/awaitable.hpp>

#include <functional>
#include <string>

#include "charge_outbox/http/server.hpp"
#include "charge_outbox/metrics/metrics.hpp"

namespace charge_outbox::app {

struct ProbeAnswer {
  bool ok = false;
  std::string status;  // the body's "status": "ok", "ready", "stalled", ...
};

struct AdminChecks {
  std::function<ProbeAnswer()> live;                            // /healthz
  std::function<boost::asio::awaitable<ProbeAnswer>()> ready;  // /readyz (may ask the database)
};

boost::asio::awaitable<http::Reply> AnswerAdmin(http::Request request, metrics::Registry& registry,
                                                const AdminChecks& checks);

}  // namespace charge_outbox::app
