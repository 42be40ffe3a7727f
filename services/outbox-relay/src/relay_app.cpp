#include "relay_app.hpp"

#include <spdlog/spdlog.h>

#include <boost/beast/http/field.hpp>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "charge_outbox/app/admin_port.hpp"
#include "charge_outbox/kafka/event_publisher.hpp"
#include "charge_outbox/metrics/metrics.hpp"
#include "charge_outbox/outbox/outbox_store.hpp"
#include "charge_outbox/util/batch_memory.hpp"
#include "relay_loop.hpp"
#include "relay_probe.hpp"

namespace charge_outbox::outbox_relay {
namespace {

namespace bhttp = boost::beast::http;
using Status = http::Status;

// How long a worker waits for the others to join before taking shards (see Parts::Join).
constexpr std::chrono::seconds kJoinWait{5};
// The backlog gauges wait at least this many times as long as counting took (see Parts::Background).
constexpr int kCountingBudget = 20;

kafka::RdKafkaOptions PublisherOptions(const RelayConfig& c) {
  return {.bootstrap_servers = c.kafka_bootstrap_servers,
          .topic = c.kafka_topic,
          .properties = c.kafka_properties,
          .delivery_deadline = c.kafka_delivery_deadline};
}

RelayLoopOptions LoopOptions(const RelayConfig& c, int worker) {
  auto options = c.loop;
  options.worker = worker;
  return options;
}

// One relay loop with what it owns: its session (a member of its own) and its producer.
struct Worker {
  Worker(const RelayConfig& config, RelayProbe& probe, int index)
      : session(outbox::MakePgRelaySession(config.database_url, "outbox-relay", config.database)),
        publisher(kafka::MakeRdKafkaPublisher(PublisherOptions(config))),
        loop(*session, *publisher, probe, LoopOptions(config, index)) {}

  std::unique_ptr<outbox::RelaySession> session;
  std::unique_ptr<kafka::EventPublisher> publisher;
  RelayLoop loop;
  std::thread thread;
  std::atomic<int> exit{-1};  // the loop's exit status once it returned
};

}  // namespace

struct RelayApp::Parts {
  explicit Parts(RelayConfig c)
      : config(std::move(c)),
        registry(metrics::NewRegistry()),
        probe(*registry, config.workers),
        admin(outbox::MakePgOutboxAdmin(config.database_url, "outbox-relay-admin", config.database)),
        server(config.http, [this](http::Request request) { return Handle(std::move(request)); }) {
    for (int i = 0; i < config.workers; ++i) workers.push_back(std::make_unique<Worker>(config, probe, i));
  }

  // The first loop that ended by itself decides the exit status; -1 while all run.
  int LoopExit() const {
    for (const auto& w : workers) {
      if (const int code = w->exit.load(); code >= 0) return code;
    }
    return -1;
  }
  // Every loop finished a step within relay.liveness_timeout (RelayLoop::last_progress).
  bool Live() const {
    const auto now = std::chrono::steady_clock::now();
    for (const auto& w : workers) {
      if (now - w->loop.last_progress() > config.liveness_timeout) return false;
    }
    return true;
  }
  bool Ready() const {
    for (const auto& w : workers) {
      if (!w->loop.ready()) return false;
    }
    return true;
  }

  boost::asio::awaitable<http::Reply> Handle(http::Request request) {
    return app::AnswerAdmin(std::move(request), *registry, checks);
  }
  const app::AdminChecks checks{
      // Alive means every loop runs and makes progress: one stuck past relay.liveness_timeout is wedged,
      // and a restart is what frees it (and its session's shards). A loop that ended takes the process down.
      .live =
          [this] {
            const bool running = LoopExit() < 0;
            if (!running) return app::ProbeAnswer{.ok = false, .status = "stopped"};
            return Live() ? app::ProbeAnswer{.ok = true, .status = "ok"}
                          : app::ProbeAnswer{.ok = false, .status = "stalled"};
          },
      .ready = [this]() -> boost::asio::awaitable<app::ProbeAnswer> {
        const bool ready = Ready() && LoopExit() < 0;
        co_return app::ProbeAnswer{.ok = ready, .status = ready ? "ready" : "not ready"};
      }};

  // Every worker becomes a member (opens its session) before any of them takes shards, so that the first
  // rebalance already shares the shards among all of this process's workers instead of the first one
  // taking all 256 and handing them over during the next rebalances. A session that cannot open now is
  // opened by its loop, which retries; the wait is bounded for that case.
  void Join(outbox::RelaySession& session) {
    if (auto opened = session.Open(); !opened) {
      spdlog::warn("opening a relay session failed ({}); the worker keeps trying", opened.error().detail);
    }
    std::unique_lock lock(mutex);
    ++joined;
    joins.notify_all();
    joins.wait_for(lock, kJoinWait,
                   [this] { return joined >= static_cast<int>(workers.size()) || stop_loop.load(); });
  }

  // Gauges from the table, and retention now and then, on a session of their own: they keep moving
  // while the loop is stuck in a batch (Kafka down), which is the point of the lag gauge.
  void Background() {
    auto next_retention = std::chrono::steady_clock::now();
    std::unique_lock lock(mutex);
    while (!stopping) {
      lock.unlock();
      const auto counting = std::chrono::steady_clock::now();
      if (auto stats = admin->Backlog(); stats) {
        probe.SetBacklog(*stats);
      } else {
        spdlog::warn("reading the outbox backlog failed: {}", stats.error().detail);
      }
      // Counting the backlog takes time in proportion to it (0.2 s for 600,000 rows): the gauges may use
      // a twentieth of a database core at most, so a large backlog being drained is counted less often.
      const auto wait = std::max<std::chrono::steady_clock::duration>(
          config.metrics_refresh, kCountingBudget * (std::chrono::steady_clock::now() - counting));
      if (config.retention_enabled && std::chrono::steady_clock::now() >= next_retention) {
        RunRetention();
        next_retention = std::chrono::steady_clock::now() + config.retention_interval;
      }
      lock.lock();
      wake.wait_for(lock, wait, [this] { return stopping; });
    }
  }

  void RunRetention() {
    auto report = admin->RunRetention(config.retention);
    if (!report) {
      spdlog::warn("outbox retention failed: {}", report.error().detail);
      return;
    }
    probe.OnRetention(*report);
    if (report->skipped) return;
    for (const auto& p : report->moved_to_history) spdlog::info("outbox retention: moved {} to outbox_history", p);
    for (const auto& p : report->dropped) spdlog::info("outbox retention: dropped partition {}", p);
    for (const auto& p : report->trimmed_ahead) spdlog::info("outbox retention: dropped {}, beyond the days ahead", p);
    for (const auto& p : report->kept_unpublished) {
      spdlog::warn("outbox retention: keeping {} past retention: it still holds unpublished events", p);
    }
    if (report->partitions_created > 0) spdlog::info("outbox: created {} partitions ahead", report->partitions_created);
  }

  RelayConfig config;
  std::shared_ptr<metrics::Registry> registry;
  RelayProbe probe;
  std::unique_ptr<outbox::OutboxAdmin> admin;
  std::vector<std::unique_ptr<Worker>> workers;
  http::Server server;
  std::atomic<bool> stop_loop{false};
  bool started = false;
  std::thread background_thread;
  std::mutex mutex;
  std::condition_variable wake;
  bool stopping = false;
  std::condition_variable joins;
  int joined = 0;
};


RelayApp::RelayApp(RelayConfig config) : parts_(std::make_unique<Parts>(std::move(config))) {}

RelayApp::~RelayApp() {
  if (parts_->started) Stop(std::chrono::milliseconds{0});
}

std::uint16_t RelayApp::Start() {
  auto& p = *parts_;
  spdlog::info("outbox-relay {}: topic {}, {} worker(s), librdkafka {}", p.config.instance_id, p.config.kafka_topic,
               p.config.workers, kafka::LibraryVersion());
  p.started = true;
  util::KeepBatchMemory();  // process-wide: before the loops start allocating
  for (auto& w : p.workers) {
    w->thread = std::thread([&p, worker = w.get()] {
      p.Join(*worker->session);
      worker->exit = worker->loop.Run(p.stop_loop);
    });
  }
  p.background_thread = std::thread([&p] { p.Background(); });
  const auto port = p.server.Start();
  spdlog::info("outbox-relay {} admin on {}:{}", p.config.instance_id, p.config.http.address, port);
  return port;
}

std::optional<int> RelayApp::Finished() const {
  const int code = parts_->LoopExit();
  if (code < 0) return std::nullopt;
  return code;
}

void RelayApp::Stop(std::chrono::milliseconds drain) {
  auto& p = *parts_;
  {
    std::lock_guard lock(p.mutex);
    p.stop_loop = true;
  }
  p.joins.notify_all();
  for (auto& w : p.workers) {
    if (w->thread.joinable()) w->thread.join();
  }
  {
    std::lock_guard lock(p.mutex);
    p.stopping = true;
  }
  p.wake.notify_all();
  if (p.background_thread.joinable()) p.background_thread.join();
  p.server.Stop(drain);
  for (auto& w : p.workers) w->session->Close();
  p.started = false;
}

}  // namespace charge_outbox::outbox_relay
