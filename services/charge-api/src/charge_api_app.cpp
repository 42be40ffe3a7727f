#include "charge_api_app.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <thread>

#include "admin_router.hpp"
#include "api_responses.hpp"
#include "api_key_cache.hpp"
#include "charge_api_probe.hpp"
#include "charge_outbox/acquirer/stripe_acquirer_client.hpp"
#include "charge_outbox/charges/charge_store.hpp"
#include "charge_outbox/charges/review_store.hpp"
#include "charge_outbox/db/database.hpp"
#include "charge_outbox/db/migrations.hpp"
#include "charge_outbox/http/admin_listener.hpp"
#include "charge_outbox/log/log.hpp"
#include "charge_outbox/merchants/merchant_store.hpp"
#include "charge_outbox/metrics/metrics.hpp"
#include "charge_outbox/util/host.hpp"
#include "charge_service.hpp"
#include "readiness.hpp"
#include "refusal_pacer.hpp"
#include "router.hpp"
#include "token_bucket.hpp"

namespace charge_outbox::charge_api {
namespace {

namespace asio = boost::asio;
using std::chrono::milliseconds;
using std::chrono::seconds;

// Merchants whose request rate is tracked; only authenticated merchants are, so no client can grow it.
constexpr std::size_t kMaxMerchantsTracked = 100'000;

// The API server's options with its pacer: none when pacing is off.
http::ServerOptions ApiServerOptions(http::ServerOptions options, const RefusalPacing& pacing, ChargeApiProbe& probe) {
  if (pacing.rule.rate > 0) options.pacer = std::make_shared<ClientRefusalPacer>(pacing, probe);
  return options;
}

}  // namespace

ChargeApiConfig LoadConfig(config::ConfigReader& r) {
  ChargeApiConfig c;
  c.http.address = r.String("http.address", "0.0.0.0");
  c.http.port = static_cast<std::uint16_t>(r.Integer("http.port", 8080, 0, 65535));
  c.http.threads = static_cast<std::size_t>(r.Integer("http.threads", 2, 1, 64));
  c.http.body_limit = static_cast<std::size_t>(r.Integer("http.body_limit", 16 * 1024, 256, 1024 * 1024));
  c.http.read_timeout = r.Duration("http.read_timeout", seconds{10}, milliseconds{100});
  c.http.idle_timeout = r.Duration("http.idle_timeout", seconds{60}, milliseconds{100});
  c.http.max_connections = static_cast<std::size_t>(r.Integer("http.max_connections", 10'000, 1, 1'000'000));
  // A tenth of the server by default: an address trickling bodies leaves nine tenths to everyone else. A
  // proxy in front concentrates its clients on its own addresses: raise it, or 0 (no limit), there.
  c.http.max_connections_per_client =
      static_cast<std::size_t>(r.Integer("http.max_connections_per_client", 1'000, 0, 1'000'000));
  // The proxies (the ingress controller's pods) whose X-Forwarded-For names the client every per-client
  // defence keys on; empty: none, the client is the TCP peer (docs/charge-api.md, "Behind a proxy").
  const auto proxies_text = r.String("http.trusted_proxies", "");
  std::string bad_proxy;
  auto proxies = http::TrustedProxies::Parse(proxies_text, &bad_proxy);
  if (!proxies) {
    throw config::ConfigError("http.trusted_proxies", "\"" + bad_proxy + "\" is not a CIDR; give comma-separated "
                                                      "blocks such as \"10.0.0.0/8, fd00::/8\", or nothing");
  }
  c.http.trusted_proxies = std::move(*proxies);
  // What one address may be refused before a merchant is known: a burst, then `rate` a second, each
  // further answer held for its turn. Tests and scanners fit in the burst; a flood slows to the rate.
  const RefusalPacing pacing_defaults;
  c.refusal_pacing.rule.rate = r.Number("http.refusal_pacing.rate", pacing_defaults.rule.rate, 0, 1e6);
  c.refusal_pacing.rule.burst = r.Number("http.refusal_pacing.burst", pacing_defaults.rule.burst, 1, 1e7);
  c.refusal_pacing.max_wait =
      r.Duration("http.refusal_pacing.max_wait", pacing_defaults.max_wait, milliseconds{1}, std::chrono::minutes{1});
  c.refusal_pacing.clients =
      static_cast<std::size_t>(r.Integer("http.refusal_pacing.clients", 100'000, 1, 10'000'000));
  // The admin port carries probes and the scrape; the API port the API alone (docs/charge-api.md, "Two ports").
  c.admin = http::LoadAdminServerOptions(r);
  // The server's own refusals (400, 413, 431, 500) carry a problem type of ours, like every other answer.
  c.http.problem_type_prefix = kProblemTypePrefix;
  c.admin.problem_type_prefix = kProblemTypePrefix;
  if (c.admin.port != 0 && c.admin.port == c.http.port) {
    throw config::ConfigError("admin.port", "must differ from http.port: probes and metrics never share the API port");
  }
  c.database_url = r.Secret("database.url");
  c.database = {.connections = static_cast<std::size_t>(r.Integer("database.pool_size", 16, 1, 256)),
                .max_queued = static_cast<std::size_t>(r.Integer("database.max_queued", 1024, 1, 1'000'000)),
                .application_name = "charge-api",
                .connection = db::LoadConnectionSettings(r)};
  c.acquirer = acquirer::LoadAcquirerClientConfig(r);
  c.instance_id = r.String("instance.id", util::HostAndProcess("charge-api"));
  c.lease = r.Duration("charge.lease", seconds{30}, seconds{1}, std::chrono::hours{1});
  // A live owner must never be taken over: its lease must outlast everything it may still be doing.
  const auto busiest = c.acquirer.retry.backoff.budget + c.acquirer.request_timeout;
  if (c.lease <= busiest) {
    throw config::ConfigError("charge.lease", "must be longer than acquirer.retry.backoff.budget + "
                                              "acquirer.request_timeout (" + std::to_string(busiest.count()) +
                                              "ms), or a request still working could be taken over");
  }
  // The reconciler's `reconciler.deadline`, the same value: past it a takeover no longer captures.
  c.deadline = r.Duration("charge.deadline", std::chrono::hours{1}, seconds{1}, std::chrono::hours{24 * 30});
  if (c.deadline <= c.lease) {
    throw config::ConfigError("charge.deadline", "must be longer than charge.lease, or a charge could pass its "
                                                 "deadline while its first request still works on it");
  }
  acquirer::CheckDeadlineAgainstAcquirer(c.acquirer, "charge.deadline", c.deadline);
  c.pending_overdue_after = r.Duration("charge.pending_overdue_after", std::chrono::minutes{10}, seconds{1});
  c.pending_overdue_refresh = r.Duration("metrics.pending_overdue_refresh", seconds{15}, milliseconds{100});
  c.auth_cache_ttl = r.Duration("auth.cache_ttl", seconds{30}, milliseconds{0}, std::chrono::hours{1});
  c.auth_cache_size = static_cast<std::size_t>(r.Integer("auth.cache_size", 10'000, 1, 10'000'000));
  c.auth_unknown_cache_size =
      static_cast<std::size_t>(r.Integer("auth.unknown_cache_size", 10'000, 1, 10'000'000));
  c.auth_pool_size = static_cast<std::size_t>(r.Integer("auth.pool_size", 2, 1, 64));
  c.auth_max_queued = static_cast<std::size_t>(r.Integer("auth.max_queued", 64, 1, 100'000));
  c.auth_failed_rate = r.Number("auth.failed_limit.rate", 5, 0, 1e6);
  c.auth_failed_burst = r.Number("auth.failed_limit.burst", 50, 1, 1e6);
  c.auth_failed_clients = static_cast<std::size_t>(r.Integer("auth.failed_limit.clients", 100'000, 1, 10'000'000));
  c.merchant_rate = r.Number("rate_limit.per_merchant.rate", 2000, 0, 1e9);
  c.merchant_burst = r.Number("rate_limit.per_merchant.burst", 4000, 1, 1e9);
  c.readiness_reuse = r.Duration("readiness.reuse_for", seconds{1}, milliseconds{0}, std::chrono::minutes{1});
  c.shutdown_deadline = r.Duration("shutdown.deadline", seconds{20}, milliseconds{100});
  // On SIGTERM a charge at work finishes its attempt in flight, or the backoff it is waiting out, then
  // records what it knows and gives its lease back: the drain must outlast both.
  const auto longest_step = c.acquirer.request_timeout + c.acquirer.retry.backoff.max;
  if (c.shutdown_deadline <= longest_step) {
    throw config::ConfigError("shutdown.deadline", "must be longer than acquirer.request_timeout + "
                                                   "acquirer.retry.backoff.max (" + std::to_string(longest_step.count()) +
                                                   "ms), or a charge at work could be cut off before it records "
                                                   "what the acquirer said");
  }
  c.log_level = r.Choice("log.level", "info", {std::begin(log::kLevels), std::end(log::kLevels)});
  r.RejectUnknownKeys();
  // Not charge.* (CHARGE_): the local stack's client variables (CHARGE_API_URL, CHARGE_API_KEY) share it.
  r.RejectUnknownEnvironment({"rate_limit", "readiness"});
  return c;
}

struct ChargeApiApp::Parts {
  explicit Parts(ChargeApiConfig c)
      : config(std::move(c)),
        registry(metrics::NewRegistry()),
        probe(*registry),
        database(config.database_url, Counted(config.database)),
        store(charges::MakePgChargeStore(database)),
        review(charges::MakePgReviewStore(database)),
        background_work(asio::make_work_guard(background)),
        acquirer_client(acquirer::MakeAcquirerClient(background.get_executor(), config.acquirer)),
        policy(config.acquirer.retry, std::make_shared<util::Mt19937RandomSource>()),
        late_records(background.get_executor(), probe),
        service(*store, *acquirer_client, policy, clock, probe, late_records,
                {.instance_id = config.instance_id,
                 .lease = config.lease,
                 .deadline = config.deadline,
                 .acquirer_request_timeout = config.acquirer.request_timeout,
                 .max_acquirer_runs = config.acquirer.max_connections + config.acquirer.max_queued}),
        auth_database(config.database_url, Counted(config.database.OtherPool("charge-api-auth", config.auth_pool_size,
                                                                             config.auth_max_queued))),
        auth_store(merchants::MakePgMerchantStore(auth_database)),
        keys(*auth_store, probe,
             {.ttl = config.auth_cache_ttl,
              .valid_entries = config.auth_cache_size,
              .unknown_entries = config.auth_unknown_cache_size}),
        failed_auth({.rate = config.auth_failed_rate, .burst = config.auth_failed_burst}, config.auth_failed_clients),
        merchant_rate({.rate = config.merchant_rate, .burst = config.merchant_burst}, kMaxMerchantsTracked),
        router(service, keys, failed_auth, merchant_rate, probe),
        readiness_database(config.database_url, Counted(config.database.OtherPool("charge-api-readiness", 1, 16))),
        readiness(readiness_database, db::EmbeddedSchemaVersion(), config.readiness_reuse),
        admin_router(readiness, *registry, probe),
        server(ApiServerOptions(config.http, config.refusal_pacing, probe),
               [this](http::Request request, const asio::ip::address& peer) {
                 return router.Handle(std::move(request), peer);
               }),
        admin_server(config.admin, [this](http::Request request) { return admin_router.Handle(std::move(request)); }) {}

  // `options` with its replaced connections counted by the probe (constructed before every pool).
  db::DatabaseOptions Counted(db::DatabaseOptions options) {
    options.on_connection_replaced = [this] { probe.OnDatabaseConnectionReplaced(); };
    return options;
  }

  // Refreshes charges_pending_overdue (the alert that something is stuck, whatever the cause) and
  // charges_needs_review (what waits for a person).
  asio::awaitable<void> RefreshPendingOverdue() {
    asio::steady_timer timer(co_await asio::this_coro::executor);
    while (!stopping) {
      const auto count = co_await store->CountPendingOlderThan(config.pending_overdue_after);
      if (count) probe.SetPendingOverdue(*count);
      const auto in_review = co_await review->CountByReason();
      if (in_review) probe.SetNeedsReview(*in_review);
      timer.expires_after(config.pending_overdue_refresh);
      boost::system::error_code ec;
      co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
  }

  ChargeApiConfig config;
  std::shared_ptr<metrics::Registry> registry;
  ChargeApiProbe probe;
  db::Database database;
  std::unique_ptr<charges::ChargeStore> store;
  std::unique_ptr<charges::ReviewStore> review;  // the count of charges in needs_review only
  // The acquirer client's connections and the gauge refresh run here, off the server's I/O threads.
  asio::io_context background;
  asio::executor_work_guard<asio::io_context::executor_type> background_work;
  std::thread background_thread;
  std::unique_ptr<acquirer::AcquirerClient> acquirer_client;  // acquirer.kind names the adapter
  util::AsioClock clock;
  acquirer::RetryPolicy policy;
  LateRecords late_records;
  ChargeService service;
  // API keys are looked up on connections of their own: a flood of unknown keys never waits for, or
  // holds, a connection that payments need.
  db::Database auth_database;
  std::unique_ptr<merchants::MerchantStore> auth_store;
  ApiKeyCache keys;
  KeyedLimiter failed_auth;
  KeyedLimiter merchant_rate;
  Router router;
  // /readyz's one connection (see readiness.hpp).
  db::Database readiness_database;
  Readiness readiness;
  AdminRouter admin_router;
  // Last: destroyed first, so no handler outlives what it uses.
  http::Server server;
  http::Server admin_server;
  std::atomic<bool> stopping{false};
};

ChargeApiApp::ChargeApiApp(ChargeApiConfig config) : parts_(std::make_unique<Parts>(std::move(config))) {}

ChargeApiApp::~ChargeApiApp() {
  if (parts_->background_thread.joinable()) Stop(milliseconds{0});
}

ChargeApiApp::Ports ChargeApiApp::Start() {
  parts_->background_thread = std::thread([this] { parts_->background.run(); });
  asio::co_spawn(parts_->background, parts_->RefreshPendingOverdue(), asio::detached);
  const Ports ports{.api = parts_->server.Start(), .admin = parts_->admin_server.Start()};
  spdlog::info("charge-api {} listening on {}:{}, admin on {}:{}", parts_->config.instance_id,
               parts_->config.http.address, ports.api, parts_->config.admin.address, ports.admin);
  return ports;
}

void ChargeApiApp::Stop(milliseconds drain) {
  parts_->service.Drain();
  parts_->server.Stop(drain);
  // Probes and the scrape answer until the API has drained.
  parts_->admin_server.Stop(milliseconds{0});
  parts_->stopping = true;
  parts_->late_records.Stop();
  parts_->background_work.reset();
  parts_->background.stop();
  if (parts_->background_thread.joinable()) parts_->background_thread.join();
  // Last, while every executor a database job resumes on still exists: past this no job can complete
  // into a server or a background that the destructor is taking down.
  parts_->readiness_database.Close();
  parts_->auth_database.Close();
  parts_->database.Close();
}

}  // namespace charge_outbox::charge_api
