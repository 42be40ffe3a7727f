#include "projection_app.hpp"

#include <spdlog/spdlog.h>

#include <boost/beast/http/field.hpp>
#include <thread>

#include "charge_outbox/app/admin_port.hpp"
#include "charge_outbox/config/config.hpp"
#include "charge_outbox/db/text_query.hpp"
#include "charge_outbox/metrics/metrics.hpp"
#include "charge_outbox/util/batch_memory.hpp"
#include "api_tokens.hpp"
#include "captured_totals.hpp"
#include "totals_query.hpp"

namespace charge_outbox::settlement {

namespace bhttp = boost::beast::http;
using Status = http::Status;

int Migrate(const ProjectionConfig& config) {
  try {
    for (const auto v : db::Migrator(config.inbox.database_url, inbox::InboxMigrations(), {.ledger = inbox::kInboxLedger}).Up()) {
      spdlog::info("applied inbox migration {}", v);
    }
    for (const auto v : db::Migrator(config.inbox.database_url, ProjectionMigrations()).Up()) {
      spdlog::info("applied settlement-projection migration {}", v);
    }
    return 0;
  } catch (const db::MigrationError& e) {
    spdlog::error("{}", e.what());
    return 1;
  }
}

struct ProjectionApp::Parts {
  explicit Parts(ProjectionConfig c)
      : config(std::move(c)),
        registry(metrics::NewRegistry()),
        inbox_probe(*registry),
        skipped(prometheus::BuildCounter()
                    .Name("settlement_projection_events_skipped_total")
                    .Help("Events the inbox applied whose payload the projection could not use")
                    .Register(*registry)
                    .Add({})),
        handler([this](const inbox::ChargeEvent& e) {
          skipped.Increment();
          spdlog::error("charge {} sequence {} ({}): payload lacks merchant_id, amount, currency or status; not counted",
                        e.charge_id, e.sequence, e.event_type);
        }),
        consumers(MakeConsumers(config.inbox, handler, inbox_probe)),
        database(config.inbox.database_url, {.connections = config.database_pool_size,
                                             .max_queued = 256,
                                             .application_name = "settlement-projection-api",
                                             .connection = config.inbox.database}),
        tokens(config.api_token_hashes),
        api(config.http, [this](http::Request r) { return HandleApi(std::move(r)); }),
        admin(config.admin, [this](http::Request r) { return HandleAdmin(std::move(r)); }) {}

  // Every request of the API port names an accepted token first, whatever its path or method: nothing on
  // this port answers, not even a 404, before that.
  boost::asio::awaitable<http::Reply> HandleApi(http::Request request) {
    http::Reply reply;
    if (auto refused = tokens.Refusal(request)) {
      reply.response = std::move(*refused);
      reply.anonymous_refusal = true;
      co_return reply;
    }
    reply.response = co_await AnswerTotalsQuery(database, request);
    co_return reply;
  }

  static std::vector<std::unique_ptr<inbox::InboxConsumer>> MakeConsumers(const inbox::InboxOptions& options,
                                                                           inbox::EventHandler& handler,
                                                                           inbox::InboxProbe& probe) {
    std::vector<std::unique_ptr<inbox::InboxConsumer>> out;
    for (int i = 0; i < options.consumers; ++i) out.push_back(std::make_unique<inbox::InboxConsumer>(options, handler, probe));
    return out;
  }

  // Every consumer's loop turned within the liveness timeout.
  bool Live() const {
    if (exit.load() >= 0) return false;
    const auto now = std::chrono::steady_clock::now();
    for (const auto& c : consumers) {
      if (now - c->Status().last_turn > config.liveness_timeout) return false;
    }
    return true;
  }

  boost::asio::awaitable<http::Reply> HandleAdmin(http::Request request) {
    return app::AnswerAdmin(std::move(request), *registry, admin_checks);
  }
  ProjectionConfig config;
  std::shared_ptr<metrics::Registry> registry;
  inbox::InboxProbe inbox_probe;
  prometheus::Counter& skipped;
  CapturedTotals handler;
  std::vector<std::unique_ptr<inbox::InboxConsumer>> consumers;
  db::Database database;
  ApiTokens tokens;
  http::Server api;
  http::Server admin;
  std::atomic<bool> stop{false};
  std::atomic<int> exit{-1};
  std::vector<std::thread> consumer_threads;
  bool started = false;
  const app::AdminChecks admin_checks{
      .live = [this] { return Live() ? app::ProbeAnswer{.ok = true, .status = "ok"}
                                     : app::ProbeAnswer{.ok = false, .status = "stalled"}; },
      // The database's part reused for readiness.reuse_for, so probes cannot load it (app::ReusedProbe).
      .ready = [this]() -> boost::asio::awaitable<app::ProbeAnswer> {
        auto answer = co_await schema_ready();
        if (exit.load() >= 0) answer = app::ProbeAnswer{.ok = false, .status = "not ready"};
        co_return answer;
      }};
  // Ready to answer queries: the projection's schema is there and its database answers (the API's pool).
  app::ReusedProbe schema_ready{[this]() -> boost::asio::awaitable<app::ProbeAnswer> {
                                  const auto version = co_await database.SchemaVersion();
                                  const bool ready = version && *version >= ProjectionMigrations().back().version;
                                  co_return app::ProbeAnswer{.ok = ready, .status = ready ? "ready" : "not ready"};
                                },
                                config.readiness_reuse};
};

ProjectionApp::ProjectionApp(ProjectionConfig config) : parts_(std::make_unique<Parts>(std::move(config))) {}

ProjectionApp::~ProjectionApp() {
  if (parts_->started) Stop(std::chrono::milliseconds{0});
}

std::pair<std::uint16_t, std::uint16_t> ProjectionApp::Start() {
  auto& p = *parts_;
  p.started = true;
  util::KeepBatchMemory();  // process-wide: before the consumers start allocating
  for (auto& c : p.consumers) {
    p.consumer_threads.emplace_back([&p, consumer = c.get()] {
      // The first consumer that ends by itself decides the exit status.
      const int code = consumer->Run(p.stop);
      int none = -1;
      if (!p.stop.load()) p.exit.compare_exchange_strong(none, code);
    });
  }
  const auto api_port = p.api.Start();
  const auto admin_port = p.admin.Start();
  spdlog::info("settlement-projection: topic {}, group {}; API on {}:{}, admin on {}:{}", p.config.inbox.topic,
               p.config.inbox.group_id, p.config.http.address, api_port, p.config.admin.address, admin_port);
  return {api_port, admin_port};
}

std::optional<int> ProjectionApp::Finished() const {
  const int code = parts_->exit.load();
  if (code < 0) return std::nullopt;
  return code;
}

void ProjectionApp::Stop(std::chrono::milliseconds drain) {
  auto& p = *parts_;
  if (!p.started) return;
  p.started = false;
  p.stop = true;
  for (auto& t : p.consumer_threads) {
    if (t.joinable()) t.join();
  }
  p.api.Stop(drain);
  p.admin.Stop(std::chrono::milliseconds{0});
  p.database.Close();
}

}  // namespace charge_outbox::settlement
