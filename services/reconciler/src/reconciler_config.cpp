#include "reconciler_config.hpp"

#include <unistd.h>

#include <iterator>

#include "charge_outbox/log/log.hpp"
#include "charge_outbox/util/host.hpp"
#include "pushgateway.hpp"

namespace charge_outbox::reconciler {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

}  // namespace

ReconcilerConfig LoadConfig(config::ConfigReader& r) {
  ReconcilerConfig c;
  c.database_url = r.Secret("database.url");
  c.database.application_name = "reconciler";
  c.database.max_queued = 100'000;  // reconciler.concurrency bounds what a run queues, not the pool
  c.database.connection = db::LoadConnectionSettings(r);
  c.acquirer = acquirer::LoadAcquirerClientConfig(r);

  auto& s = c.sweep;
  s.grace_period = r.Duration("reconciler.grace_period", std::chrono::minutes{2}, milliseconds{0},
                              std::chrono::hours{24});
  s.batch_size = static_cast<int>(r.Integer("reconciler.batch_size", 100, 1, 10'000));
  s.concurrency = static_cast<int>(r.Integer("reconciler.concurrency", 8, 1, 256));
  s.time_budget = r.Duration("reconciler.time_budget", seconds{50}, milliseconds{1}, std::chrono::hours{24});
  s.claim_lease = r.Duration("reconciler.claim_lease", seconds{90}, seconds{1}, std::chrono::hours{1});
  // One charge may need two acquirer operations (lookup, then capture or void), each up to the retry
  // budget plus one call timeout; the lease is renewed before the second, so it must cover one with room.
  const auto one_operation = c.acquirer.retry.backoff.budget + c.acquirer.request_timeout;
  if (s.claim_lease < 2 * one_operation) {
    throw config::ConfigError("reconciler.claim_lease",
                              "must be at least twice acquirer.retry.backoff.budget + acquirer.request_timeout (" +
                                  std::to_string(2 * one_operation.count()) +
                                  "ms), or a claim could expire while its charge is being worked on");
  }

  auto& d = s.decision;
  d.deadline = r.Duration("reconciler.deadline", std::chrono::hours{1}, seconds{1}, std::chrono::hours{24 * 30});
  d.visibility_window = r.Duration("reconciler.visibility_window", std::chrono::minutes{5}, milliseconds{0},
                                   std::chrono::hours{24});
  if (d.visibility_window >= d.deadline) {
    throw config::ConfigError("reconciler.visibility_window",
                              "must be shorter than reconciler.deadline, or no charge could ever be concluded "
                              "not captured before its deadline");
  }
  acquirer::CheckDeadlineAgainstAcquirer(c.acquirer, "reconciler.deadline", d.deadline);
  // Stripe's lookup is a search, which lags: a search that finds nothing proves nothing until its lag has
  // passed, and the window is how long the reconciler waits before it reads "not found" as an answer.
  if (c.acquirer.kind == acquirer::AcquirerKind::kStripe && d.visibility_window < c.acquirer.stripe.search_lag) {
    throw config::ConfigError("reconciler.visibility_window",
                              "is shorter than acquirer.stripe.search_lag (" +
                                  std::to_string(c.acquirer.stripe.search_lag.count()) +
                                  "ms): Stripe's search may not show a PaymentIntent that long, so \"not found\" "
                                  "would be read before it means anything");
  }
  const auto policy = r.Choice("reconciler.not_found_policy", "resubmit", {"resubmit", "review", "fail"});
  d.not_found_policy = policy == "fail"     ? NotFoundPolicy::kFail
                       : policy == "review" ? NotFoundPolicy::kReview
                                            : NotFoundPolicy::kResubmit;
  d.backoff =
      retry::LoadBackoffOptions(r, "reconciler", DecisionOptions{}.backoff, milliseconds{1}, std::chrono::hours{24});

  c.window.max_captures = r.Integer("reconciler.window.max_captures", 1'000'000, 1, 100'000'000);

  c.database.connections = static_cast<std::size_t>(
      r.Integer("database.pool_size", static_cast<std::int64_t>(s.concurrency) + 2, 1, 512));
  c.pushgateway.url = r.String("metrics.pushgateway.url", "");
  if (!c.pushgateway.url.empty() && !ParsePushgatewayUrl(c.pushgateway.url)) {
    // The value is not echoed: a URL may carry credentials.
    throw config::ConfigError("metrics.pushgateway.url", "expected http://host:port or https://host:port");
  }
  c.pushgateway.job = r.String("metrics.pushgateway.job", "reconciler");
  if (c.pushgateway.job.empty()) {
    throw config::ConfigError("metrics.pushgateway.job", "must not be empty; the default is reconciler");
  }
  c.instance_id = r.String("instance.id", util::HostName("reconciler"));
  c.log_level = r.Choice("log.level", "info", {std::begin(log::kLevels), std::end(log::kLevels)});
  r.RejectUnknownKeys();
  r.RejectUnknownEnvironment({"reconciler"});
  return c;
}

}  // namespace charge_outbox::reconciler
