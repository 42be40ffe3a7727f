// The admin port of a daemon without an API router of its own (outbox-relay, settlement-projection):
// `/metrics` (the registry, Prometheus text), `/healthz` and `/readyz`, GET only (any other method is a
// 405 naming GET), anything else a 404. What alive and ready mean is each daemon's; the answers' shape is
// shared: `{"status": "..."}`, 200 when the check holds and 503 when it does not. ReusedProbe keeps a
// readiness check that asks the database from running once per probe.
#pragma once

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
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

// A check whose answer is reused for `reuse_for`: however many probes come (every kubelet, a flood on the
// admin port), the check behind it runs at most once per interval, plus once per probe that arrives
// while no answer exists yet (the very first ones). While the check runs, others take the last answer
// instead of queueing behind it. charge-api's Readiness does the same for its own /readyz.
// Thread-safe; the check must outlive it.
class ReusedProbe {
 public:
  using Check = std::function<boost::asio::awaitable<ProbeAnswer>()>;
  using Now = std::function<std::chrono::steady_clock::time_point()>;
  ReusedProbe(Check check, std::chrono::milliseconds reuse_for, Now now = [] { return std::chrono::steady_clock::now(); });

  boost::asio::awaitable<ProbeAnswer> operator()();

 private:
  const Check check_;
  const std::chrono::milliseconds reuse_for_;
  const Now now_;
  std::mutex mutex_;
  std::optional<ProbeAnswer> last_;
  std::chrono::steady_clock::time_point checked_at_{};
  bool checking_ = false;
};

boost::asio::awaitable<http::Reply> AnswerAdmin(http::Request request, metrics::Registry& registry,
                                                const AdminChecks& checks);

}  // namespace charge_outbox::app
