#include "chaos_stack.hpp"

#include <pqxx/pqxx>

#include <csignal>
#include <cctype>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "charge_outbox/util/time.hpp"
#include "http_test_client.hpp"
#include "test_env.hpp"

namespace charge_outbox::chaos {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr std::chrono::milliseconds kAcquirerRequestTimeout{1000};

std::string Millis(std::chrono::milliseconds duration) { return std::to_string(duration.count()) + "ms"; }

// The Stripe run's budget of searches per second (StripeSettings): Stripe allows 20 per account; the
// simulated merchant is allowed more, so that a short run drains the hundreds of lookups its staged pile
// needs in seconds. What matters is the rule an operator follows too: the processes sharing one key pace
// themselves to a sum within the account's limit.
constexpr int kSimSearchRateLimit = 100;
constexpr int kChargeApiSearchRate = 10;   // each of two: a takeover's lookup
constexpr int kReconcilerSearchRate = 16;  // each: a run's sixteen workers, one search each a second
// At once: the timer's, the settling's, a second run or the staged pair, a window report.
constexpr int kReconcilersBudgeted = 5;
static_assert(2 * kChargeApiSearchRate + kReconcilersBudgeted * kReconcilerSearchRate <= kSimSearchRateLimit);

// A Patroni node's index among the proxies: pg1 -> 0.
std::size_t NodeIndex(const std::string& node) { return static_cast<std::size_t>(std::stoi(node.substr(2)) - 1); }

constexpr const char* kLibFaketime = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";

bool HealthyOver(std::uint16_t port, const std::string& path) {
  testing::HttpTestClient client(port, "127.0.0.1", 1s);
  const auto r = client.Get(path);
  return r.ok() && r.status() == 200u;
}

}  // namespace

void LinkGroup::Add(testing::FaultProxy& proxy) {
  std::lock_guard lock(mutex_);
  proxies_.push_back(&proxy);
  down_.push_back(false);
}

void LinkGroup::Each(const std::function<void(testing::FaultProxy&)>& action) {
  std::lock_guard lock(mutex_);
  for (std::size_t i = 0; i < proxies_.size(); ++i) {
    if (!down_[i]) action(*proxies_[i]);
  }
}

void LinkGroup::BlackHoleOne(std::size_t index) {
  std::lock_guard lock(mutex_);
  if (!down_.at(index)) proxies_.at(index)->BlackHole();
}

void LinkGroup::PassOne(std::size_t index) {
  std::lock_guard lock(mutex_);
  if (!down_.at(index)) proxies_.at(index)->Pass();
}

void LinkGroup::Down(std::size_t index) {
  std::lock_guard lock(mutex_);
  down_.at(index) = true;
  proxies_.at(index)->Refuse();
}

void LinkGroup::Up(std::size_t index) {
  std::lock_guard lock(mutex_);
  down_.at(index) = false;
  proxies_.at(index)->Pass();
}

std::string_view ToString(AcquirerDialect dialect) {
  switch (dialect) {
    case AcquirerDialect::kNative: return "native";
    case AcquirerDialect::kStripe: return "stripe";
  }
  return "?";
}

std::string_view ToString(Daemon daemon) {
  switch (daemon) {
    case Daemon::kChargeApi: return "charge-api";
    case Daemon::kRelay: return "outbox-relay";
    case Daemon::kAcquirer: return "acquirer-sim";
  }
  return "?";
}

ChaosStack::ChaosStack(Binaries binaries, fs::path state_dir, std::ostream& log)
    : bin_(std::move(binaries)), state_(std::move(state_dir)), log_(log) {}

ChaosStack::~ChaosStack() {
  try {
    Stop();
  } catch (const std::exception& e) {
    log_ << "stopping the stack: " << e.what() << "\n";
  }
}

void ChaosStack::SkewChargeApiClock(const std::string& offset) {
  if (!fs::exists(kLibFaketime)) {
    throw std::runtime_error(std::string(kLibFaketime) + " is missing: deploy/local/install-deps installs faketime");
  }
  clock_skew_ = offset;
}

namespace {
std::string Trimmed(std::string text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  return text;
}
}  // namespace

std::string ChaosStack::Shell(const std::string& script, std::chrono::seconds timeout) {
  const std::string lib = bin_.project_root + "/deploy/local/lib";
  std::string sources;
  for (const char* file : {"common", "postgres", "kafka", "patroni", "kafka_cluster"}) {
    sources += "source " + lib + "/" + file + ".sh; ";
  }
  const auto r = testing::RunProcess({"/bin/bash", "-c", "set -euo pipefail; " + sources + script}, {}, timeout);
  if (r.exit_code != 0) throw std::runtime_error("`" + script + "` failed:\n" + r.out + r.err);
  return r.out;
}

void ChaosStack::Start() {
  fs::create_directories(state_ / "logs");
  fs::permissions(state_, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                              fs::perms::others_read | fs::perms::others_exec);
  acquirer_port_ = static_cast<std::uint16_t>(testing::FreeLoopbackPort());
  for (int i = 0; i < 2; ++i) api_ports_.push_back(static_cast<std::uint16_t>(testing::FreeLoopbackPort()));
  for (int i = 0; i < 2; ++i) admin_ports_.push_back(static_cast<std::uint16_t>(testing::FreeLoopbackPort()));
  acquirer_proxy_ = std::make_unique<testing::FaultProxy>("127.0.0.1", acquirer_port_);
  acquirer_links_.Add(*acquirer_proxy_);
  started_ = true;

  StartPostgres();
  StartKafka();
  const auto migrated = testing::RunProcess({bin_.charge_migrate, "up"}, {{"DATABASE_URL", database_url()}}, 120s);
  if (migrated.exit_code != 0) throw std::runtime_error("charge-migrate up failed:\n" + migrated.out + migrated.err);
  {
    merchants_ = {{"00000000-0000-4000-8000-00000000c4a1", "sk_chaos_one"},
                  {"00000000-0000-4000-8000-00000000c4a2", "sk_chaos_two"}};
    pqxx::connection conn(database_url());
    pqxx::nontransaction tx(conn);
    for (const auto& m : merchants_) {
      tx.exec_params("INSERT INTO merchants (id, name) VALUES ($1::uuid, $1::text)", m.id);
      tx.exec_params("INSERT INTO api_keys (key_hash, merchant_id, key_prefix) VALUES (sha256(convert_to($1, 'UTF8')), $2, 'sk_chaos')",
                     m.api_key, m.id);
    }
  }

  {
    std::lock_guard lock(mutex_);
    slots_.push_back(Slot{Daemon::kAcquirer, 0});
    for (int i = 0; i < 2; ++i) slots_.push_back(Slot{Daemon::kChargeApi, i});
    for (int i = 0; i < 2; ++i) slots_.push_back(Slot{Daemon::kRelay, i});
    for (auto& slot : slots_) StartProcess(slot);
  }
  const auto deadline = Clock::now() + 60s;
  auto ready = [&] {
    if (!HealthyOver(acquirer_port_, "/healthz")) return false;
    for (const auto port : admin_ports_) {
      if (!HealthyOver(port, "/readyz")) return false;
    }
    return true;
  };
  while (!ready()) {
    if (Clock::now() > deadline) throw std::runtime_error("the daemons did not become ready; logs in " + state_.string());
    std::this_thread::sleep_for(100ms);
  }
  supervisor_ = std::thread([this] { Supervise(); });
  reconciler_timer_on_ = true;
  reconciler_timer_ = std::thread([this] { ReconcilerTimer(); });
}

// The proxies' ports are the daemons' view of the topology; the real ports are the checker's.
void ChaosStack::StartPostgres() {
  if (!high_availability()) {
    pg_port_ = testing::FreeLoopbackPort();
    pg_proxies_.push_back(std::make_unique<testing::FaultProxy>("127.0.0.1", static_cast<std::uint16_t>(pg_port_)));
    pg_links_.Add(*pg_proxies_.back());
    Shell("pg_start " + state_.string() + " " + std::to_string(pg_port_) + " fast");
    return;
  }
  // "ETCD:PEER PG:REST PG:REST"; fsync off (PATRONI_FAST): the faults kill processes, not the machine, so
  // the page cache keeps what was written, and commits still wait for the synchronous standby.
  const auto ports = Trimmed(Shell("patroni_free_ports 2"));
  std::istringstream words(ports);
  std::string spec;
  words >> spec;  // etcd's pair
  while (words >> spec) {
    const auto pg = static_cast<std::uint16_t>(std::stoi(spec.substr(0, spec.find(':'))));
    pg_proxies_.push_back(std::make_unique<testing::FaultProxy>("127.0.0.1", pg));
    pg_links_.Add(*pg_proxies_.back());
  }
  Shell("PATRONI_FAST=1 patroni_start " + state_.string() + " " + replication_ + " " + ports);
}

void ChaosStack::StartKafka() {
  if (!high_availability()) {
    kafka_port_ = testing::FreeLoopbackPort();
    kafka_controller_port_ = testing::FreeLoopbackPort();
    broker_proxies_.push_back(std::make_unique<testing::FaultProxy>("127.0.0.1", static_cast<std::uint16_t>(kafka_port_)));
    kafka_links_.Add(*broker_proxies_.back());
    // Clients are told the proxy's port, so every connection to the broker goes through it.
    Shell("export KAFKA_ADVERTISED_PORT=" + std::to_string(broker_proxies_[0]->port()) + "; kafka_start " +
          (state_ / "kafka").string() + " " + std::to_string(kafka_port_) + " " +
          std::to_string(kafka_controller_port_) + " && kafka_wait " + std::to_string(kafka_port_) + " 120 " +
          (state_ / "kafka").string());
    return;
  }
  // "PORT:CPORT" three times; each broker advertises its proxy, to clients and to the other brokers.
  const auto ports = Trimmed(Shell("kafka_cluster_free_ports"));
  std::istringstream words(ports);
  std::string spec, advertised;
  while (words >> spec) {
    const auto port = static_cast<std::uint16_t>(std::stoi(spec.substr(0, spec.find(':'))));
    broker_proxies_.push_back(std::make_unique<testing::FaultProxy>("127.0.0.1", port));
    kafka_links_.Add(*broker_proxies_.back());
    advertised += (advertised.empty() ? "" : " ") + std::to_string(broker_proxies_.back()->port());
  }
  Shell("export KAFKA_CLUSTER_ADVERTISED_PORTS='" + advertised + "'; kafka_cluster_start " + state_.string() + " " +
            ports + " && kafka_cluster_create_topic " + state_.string() + " " + topic_ + " 6",
        std::chrono::seconds{300});
}

void ChaosStack::UseHighAvailability(const std::string& replication) {
  if (replication != "sync" && replication != "strict" && replication != "async") {
    throw std::invalid_argument("replication '" + replication + "' is none of sync, strict, async");
  }
  replication_ = replication;
}

void ChaosStack::UseAcquirerDialect(AcquirerDialect dialect) {
  dialect_ = dialect;
  stripe_ = StripeSettings{};
  if (dialect != AcquirerDialect::kStripe) return;
  const std::chrono::milliseconds deadline = deadline_;
  stripe_.key_retention = 2 * deadline;
  // The bound charge-api and the reconciler refuse to start beyond (acquirer::MaxDeadline).
  const auto latest = stripe_.key_retention - stripe_.key_retention / 24 - kAcquirerRequestTimeout;
  if (deadline > latest) {
    throw std::invalid_argument("a deadline of " + Millis(deadline) + " does not fit a key retention of " +
                                Millis(stripe_.key_retention));
  }
  stripe_.search_lag = kVisibilityWindow;
  stripe_.sim_search_rate_limit = kSimSearchRateLimit;
  stripe_.charge_api_search_rate = kChargeApiSearchRate;
  stripe_.reconciler_search_rate = kReconcilerSearchRate;
  stripe_.reconcilers_budgeted = kReconcilersBudgeted;
  // Searched within half the claim lease (5 s): a batch outlasting its claim would be taken over mid-run.
  stripe_.reconciler_batch_size = kReconcilerSearchRate * 5 / 2;
}

testing::EnvChanges ChaosStack::AcquirerClientSettings(int search_rate) const {
  // The daemons resolve unknown outcomes and dead owners in seconds, as the e2e suites configure them.
  testing::EnvChanges env{{"ACQUIRER_REQUEST_TIMEOUT", Millis(kAcquirerRequestTimeout)},
                          {"ACQUIRER_RETRY_MAX_ATTEMPTS", "3"},
                          {"ACQUIRER_RETRY_BACKOFF_BASE", "50ms"},
                          {"ACQUIRER_RETRY_BACKOFF_MAX", "200ms"},
                          {"ACQUIRER_RETRY_BACKOFF_BUDGET", "1s"},
                          {"ACQUIRER_CONNECT_TIMEOUT", "500ms"}};
  if (dialect_ == AcquirerDialect::kStripe) {
    env.insert({{"ACQUIRER_KIND", "stripe"},
                {"ACQUIRER_STRIPE_KEY_RETENTION", Millis(stripe_.key_retention)},
                {"ACQUIRER_STRIPE_SEARCH_LAG", Millis(stripe_.search_lag)},
                {"ACQUIRER_STRIPE_SEARCH_RATE_LIMIT", std::to_string(search_rate)}});
  }
  return env;
}

void ChaosStack::Stop() {
  if (!started_) return;
  started_ = false;
  stopping_ = true;
  reconciler_timer_on_ = false;
  if (supervisor_.joinable()) supervisor_.join();
  if (reconciler_timer_.joinable()) reconciler_timer_.join();
  {
    std::lock_guard lock(mutex_);
    for (auto& slot : slots_) {
      if (!slot.process) continue;
      // SIGTERM first, so that what each daemon buffered reaches its log.
      slot.process->Signal(SIGTERM);
      for (int i = 0; i < 60 && slot.process->Running(); ++i) std::this_thread::sleep_for(50ms);
      slot.process->Signal(SIGKILL);
      slot.process->Wait(std::chrono::seconds{10});
      Reap(slot);
    }
  }
  // Both, even when the first fails, so that nothing is left running; the failure is still reported.
  if (high_availability()) {
    Shell("rc=0; kafka_cluster_stop " + state_.string() + " || rc=1; patroni_stop " + state_.string() +
          " || rc=1; exit $rc");
  } else {
    Shell("rc=0; kafka_stop " + (state_ / "kafka").string() + " || rc=1; pg_stop " + state_.string() +
          " || rc=1; exit $rc");
  }
}

testing::EnvChanges ChaosStack::Environment(const Slot& slot) const {
  const auto through_proxy = DaemonDatabaseUrl();
  const auto acquirer_url = "http://127.0.0.1:" + std::to_string(acquirer_proxy_->port());
  const auto instance = std::string(ToString(slot.daemon)) + "-" + std::to_string(slot.index);
  testing::EnvChanges env{{"LOG_LEVEL", "warn"}, {"INSTANCE_ID", instance}, {"FAILPOINTS", slot.failpoints}};
  switch (slot.daemon) {
    case Daemon::kAcquirer:
      env.insert({{"HTTP_ADDRESS", "127.0.0.1"},
                  {"HTTP_PORT", std::to_string(acquirer_port_)},
                  {"DATA_DIR", (state_ / "acquirer").string()},
                  {"AUTH_API_KEYS", acquirer_key_},
                  {"SHUTDOWN_DEADLINE", "1s"}});
      if (dialect_ == AcquirerDialect::kStripe) {
        env.insert({{"STRIPE_IDEMPOTENCY_KEY_RETENTION", Millis(stripe_.key_retention)},
                    {"STRIPE_SEARCH_RATE_LIMIT", std::to_string(stripe_.sim_search_rate_limit)}});
      }
      env.erase("INSTANCE_ID");
      env.erase("FAILPOINTS");
      break;
    case Daemon::kChargeApi:
      env.insert({{"DATABASE_URL", through_proxy},
                  {"DATABASE_POOL_SIZE", "8"},
                  {"HTTP_ADDRESS", "127.0.0.1"},
                  {"HTTP_PORT", std::to_string(api_ports_.at(static_cast<std::size_t>(slot.index)))},
                  {"ADMIN_ADDRESS", "127.0.0.1"},
                  {"ADMIN_PORT", std::to_string(admin_ports_.at(static_cast<std::size_t>(slot.index)))},
                  {"ACQUIRER_URL", acquirer_url},
                  {"ACQUIRER_API_KEY", acquirer_key_},
                  {"CHARGE_LEASE", "3s"},
                  {"CHARGE_DEADLINE", std::to_string(deadline_.count()) + "s"},
                  {"SHUTDOWN_DEADLINE", "2s"},  // above one attempt plus one backoff (1 s + 200 ms)
                  {"AUTH_CACHE_TTL", "60s"},
                  // A database that does not answer is told to the client (503) inside its 5 s timeout.
                  {"DATABASE_STATEMENT_TIMEOUT", "1500ms"},
                  {"DATABASE_CALL_TIMEOUT", "2s"},
                  // Few connections to the acquirer and a queue behind them, so that a slow acquirer makes
                  // charges wait out their deadline in our own queue: 503 acquirer-busy after their intent
                  // (nothing sent), and before it once the queue is full.
                  {"ACQUIRER_POOL_MAX_CONNECTIONS", "2"},
                  {"ACQUIRER_POOL_MAX_QUEUED", "8"}});
      for (const auto& [k, v] : AcquirerClientSettings(stripe_.charge_api_search_rate)) env[k] = v;
      if (slot.index == 1 && !clock_skew_.empty()) {
        env.insert({{"LD_PRELOAD", kLibFaketime}, {"FAKETIME", clock_skew_}, {"FAKETIME_DONT_FAKE_MONOTONIC", "1"},
                    {"FAKETIME_NO_CACHE", "1"}});
      }
      break;
    case Daemon::kRelay:
      env.insert({{"DATABASE_URL", through_proxy},
                  {"KAFKA_BOOTSTRAP_SERVERS", kafka_bootstrap()},
                  {"KAFKA_TOPIC", topic_},
                  {"KAFKA_MESSAGE_TIMEOUT", "10s"},
                  {"ADMIN_ADDRESS", "127.0.0.1"},
                  {"ADMIN_PORT", "0"},
                  {"RELAY_POLL_INTERVAL", "200ms"},
                  {"LOG_LEVEL", "info"},
                  {"SHUTDOWN_DEADLINE", "1s"}});
      break;
  }
  return env;
}

void ChaosStack::StartProcess(Slot& slot) {
  const std::string* binary = nullptr;
  switch (slot.daemon) {
    case Daemon::kChargeApi: binary = &bin_.charge_api; break;
    case Daemon::kRelay: binary = &bin_.outbox_relay; break;
    case Daemon::kAcquirer: binary = &bin_.acquirer_sim; break;
  }
  slot.process = std::make_unique<testing::ChildProcess>(std::vector<std::string>{*binary}, Environment(slot));
  slot.failpoints.clear();  // for one start only: once it has died there, it comes back clean
  ++slot.starts;
}

void ChaosStack::Reap(Slot& slot) {
  if (!slot.process) return;
  if (slot.process->Running()) return;
  const auto name = std::string(ToString(slot.daemon)) + "-" + std::to_string(slot.index);
  std::ofstream(state_ / "logs" / (name + ".log"), std::ios::app)
      << "---- start " << slot.starts << "\n" << slot.process->CurrentOutput();
  slot.process.reset();
}

void ChaosStack::Supervise() {
  while (!stopping_) {
    {
      std::lock_guard lock(mutex_);
      const auto now = Clock::now();
      for (auto& slot : slots_) {
        if (slot.process && !slot.process->Running()) {
          Reap(slot);
          // Died by itself (a failpoint, a crash): back after a short pause, as a Deployment would.
          slot.down_until = std::max(slot.down_until, now + 200ms);
        }
        if (!slot.process && now >= slot.down_until && !stopping_) {
          try {
            StartProcess(slot);
          } catch (const std::exception& e) {
            // Not in this thread (it would end the process without a verdict): retried, and the first
            // failure ends the run once the faults stop (HealAll), with its state kept.
            if (start_failure_.empty()) start_failure_ = e.what();
            slot.down_until = now + 1s;
            continue;
          }
          if (slot.daemon == Daemon::kAcquirer && acquirer_proxy_->mode() == testing::FaultProxy::Mode::kRefuse) {
            acquirer_proxy_->Pass();
          }
        }
      }
    }
    std::this_thread::sleep_for(50ms);
  }
}

ChaosStack::Slot& ChaosStack::SlotOf(Daemon daemon, int index) {
  for (auto& slot : slots_) {
    if (slot.daemon == daemon && slot.index == index) return slot;
  }
  throw std::out_of_range("no such daemon");
}

int ChaosStack::Count(Daemon daemon) const { return daemon == Daemon::kAcquirer ? 1 : 2; }

void ChaosStack::Kill(Daemon daemon, int index, std::chrono::milliseconds down_for) {
  std::lock_guard lock(mutex_);
  auto& slot = SlotOf(daemon, index);
  // A dead acquirer's port refuses connections; through the proxy too, so the daemons see exactly that.
  if (daemon == Daemon::kAcquirer) acquirer_proxy_->Refuse();
  if (slot.process) slot.process->Signal(SIGKILL);
  slot.failpoints.clear();
  slot.down_until = Clock::now() + down_for;
}

void ChaosStack::RestartWithFailpoints(Daemon daemon, int index, const std::string& failpoints) {
  std::lock_guard lock(mutex_);
  auto& slot = SlotOf(daemon, index);
  if (slot.process) {
    slot.process->Signal(SIGKILL);
    for (int i = 0; i < 200 && slot.process->Running(); ++i) std::this_thread::sleep_for(5ms);
    Reap(slot);
  }
  slot.failpoints = failpoints;
  slot.down_until = Clock::now();
  StartProcess(slot);
}

bool ChaosStack::Running(Daemon daemon, int index) {
  std::lock_guard lock(mutex_);
  auto& slot = SlotOf(daemon, index);
  return slot.process && slot.process->Running();
}

bool ChaosStack::SetAcquirerFaults(const std::string& profile_json) {
  testing::HttpTestClient client(acquirer_port_, "127.0.0.1", 2s);
  const auto r = client.Put("/admin/faults", profile_json);
  return r.ok() && r.status() == 200u;
}

std::map<std::string, std::int64_t> ChaosStack::AcquirerRequestCounts() {
  testing::HttpTestClient client(acquirer_port_, "127.0.0.1", 2s);
  const auto r = client.Get("/admin/stats");
  std::map<std::string, std::int64_t> counts;
  if (!r.ok() || r.status() != 200u) return counts;
  const auto stats = r.json();
  const auto* requests = stats.as_object().if_contains("requests");
  if (requests == nullptr || !requests->is_object()) return counts;
  for (const auto& [kind, n] : requests->as_object()) {
    if (n.is_number()) counts[std::string(kind)] = n.to_number<std::int64_t>();
  }
  return counts;
}

void ChaosStack::RestartPostgres() {
  if (high_availability()) {
    const auto primary = PostgresPrimary();
    if (primary.empty()) return;
    // Down while it is: its port refuses, as a crashed server's does, until Patroni has it running again.
    pg_links_.Down(NodeIndex(primary));
    Shell("patroni_kill_postgres " + state_.string() + " " + primary + " && for i in $(seq 600); do"
          " pg_isready -q -h 127.0.0.1 -p $(patroni_pg_port " + state_.string() + " " + primary +
          ") && break; sleep 0.1; done");
    pg_links_.Up(NodeIndex(primary));
    return;
  }
  Shell("pg_stop " + state_.string() + " && pg_start " + state_.string() + " " + std::to_string(pg_port_) + " fast");
}

void ChaosStack::RestartKafka() {
  if (high_availability()) {
    const int node = BusiestBroker();
    KillBroker(node);
    StartBroker(node);
    return;
  }
  const auto dir = (state_ / "kafka").string();
  Shell("export KAFKA_ADVERTISED_PORT=" + std::to_string(broker_proxies_[0]->port()) + "; kafka_stop " + dir +
        " && kafka_start " + dir + " " + std::to_string(kafka_port_) + " " + std::to_string(kafka_controller_port_) +
        " && kafka_wait " + std::to_string(kafka_port_) + " 120 " + dir);
}

std::string ChaosStack::PostgresPrimary() {
  try {
    return Trimmed(Shell("patroni_primary " + state_.string(), std::chrono::seconds{20}));
  } catch (const std::exception&) {
    return "";  // none names itself primary now
  }
}

std::string ChaosStack::PostgresStandby() {
  const auto primary = PostgresPrimary();
  if (primary.empty()) return "";
  return primary == "pg1" ? "pg2" : "pg1";
}

bool ChaosStack::PostgresWhole(std::chrono::seconds within) {
  try {
    Shell("patroni_wait_healthy " + state_.string() + " " + std::to_string(within.count()) + " 2>/dev/null",
          within + std::chrono::seconds{20});
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

void ChaosStack::KillPostgresNode(const std::string& node) {
  Shell("patroni_kill_node " + state_.string() + " " + node);
  pg_links_.Down(NodeIndex(node));
}

void ChaosStack::StartPostgresNode(const std::string& node) {
  pg_links_.Up(NodeIndex(node));
  Shell("patroni_start_node " + state_.string() + " " + node, std::chrono::seconds{120});
}

void ChaosStack::StopWalSenders(const std::string& node) {
  // A WAL sender is the postmaster's child whose title says so.
  Shell("pm=$(head -n 1 " + (state_ / "patroni" / node / "data" / "postmaster.pid").string() +
        ") && for pid in $(ps -o pid= --ppid \"$pm\"); do"
        " if grep -q walsender /proc/$pid/cmdline 2>/dev/null; then kill -STOP $pid; fi; done");
}

void ChaosStack::KillEtcd() { Shell("patroni_kill_etcd " + state_.string()); }

void ChaosStack::StartEtcd() { Shell("patroni_start_etcd " + state_.string(), std::chrono::seconds{60}); }

int ChaosStack::BusiestBroker() {
  try {
    return std::stoi(Shell("kafka_cluster_busiest_leader " + state_.string() + " " + topic_, std::chrono::seconds{60}));
  } catch (const std::exception&) {
    return 1;  // the tool itself failed (a broker away): any node will do
  }
}

void ChaosStack::KillBroker(int node) {
  Shell("kafka_cluster_kill " + state_.string() + " " + std::to_string(node) + " || true");
  kafka_links_.Down(static_cast<std::size_t>(node - 1));
}

void ChaosStack::StartBroker(int node) {
  kafka_links_.Up(static_cast<std::size_t>(node - 1));
  Shell("kafka_cluster_start_node " + state_.string() + " " + std::to_string(node) + " && kafka_cluster_wait " +
            state_.string() + " 180",
        std::chrono::seconds{240});
}

bool ChaosStack::PostgresWritable() {
  try {
    pqxx::connection conn(database_url() + "&connect_timeout=1");
    pqxx::nontransaction tx(conn);
    tx.exec("SET statement_timeout = 1000");
    tx.exec("SELECT pg_logical_emit_message(true, 'chaos', 'writable')");
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

void ChaosStack::ArmReconcilerFailpoint(const std::string& failpoints) {
  std::lock_guard lock(mutex_);
  reconciler_failpoints_ = failpoints;
}

int ChaosStack::RunReconciler(const std::string& failpoints, std::vector<std::string> args) {
  auto env = AcquirerClientSettings(stripe_.reconciler_search_rate);
  if (stripe_.reconciler_batch_size > 0) env["RECONCILER_BATCH_SIZE"] = std::to_string(stripe_.reconciler_batch_size);
  env.insert({{"DATABASE_URL", DaemonDatabaseUrl()},
              {"ACQUIRER_URL", "http://127.0.0.1:" + std::to_string(acquirer_proxy_->port())},
              {"ACQUIRER_API_KEY", acquirer_key_},
              {"RECONCILER_GRACE_PERIOD", "2s"},
              {"RECONCILER_CLAIM_LEASE", "5s"},
              {"RECONCILER_BACKOFF_BASE", "200ms"},
              {"RECONCILER_BACKOFF_MAX", "1s"},
              {"RECONCILER_VISIBILITY_WINDOW", Millis(kVisibilityWindow)},
              {"RECONCILER_DEADLINE", std::to_string(deadline_.count()) + "s"},
              {"RECONCILER_TIME_BUDGET", "20s"},
              {"RECONCILER_CONCURRENCY", "16"},
              // A run with failpoints is a staged scenario: its decisions are worth reading in the log.
              {"LOG_LEVEL", failpoints.empty() ? "warn" : "info"},
              {"FAILPOINTS", failpoints},
              {"METRICS_PUSHGATEWAY_URL", std::nullopt}});
  const bool window = !args.empty();
  args.insert(args.begin(), bin_.reconciler);
  const int running = ++reconcilers_;
  for (int seen = max_reconcilers_; running > seen && !max_reconcilers_.compare_exchange_weak(seen, running);) {
  }
  const auto r = testing::RunProcess(args, env, 120s);
  --reconcilers_;
  std::lock_guard lock(mutex_);
  std::ofstream(state_ / "logs" / (window ? "reconciler-window.log" : "reconciler.log"), std::ios::app)
      << r.out << r.err;
  return r.term_signal != 0 ? 128 + r.term_signal : r.exit_code;
}

int ChaosStack::RunReconcilerOnce() { return RunReconciler(""); }

int ChaosStack::RunReconcilerBeside(const std::string& failpoints) { return RunReconciler(failpoints); }

int ChaosStack::RunWindowReport(std::chrono::system_clock::time_point from, std::chrono::system_clock::time_point to) {
  return RunReconciler("", {"window", "--from", util::FormatRfc3339(from), "--to", util::FormatRfc3339(to)});
}

void ChaosStack::PauseReconcilerTimer(std::chrono::milliseconds how_long) {
  const auto until = (Clock::now() + how_long).time_since_epoch();
  reconciler_paused_until_ns_ = std::chrono::duration_cast<std::chrono::nanoseconds>(until).count();
}

void ChaosStack::ReconcilerTimer() {
  while (reconciler_timer_on_ && !stopping_) {
    if (Clock::now().time_since_epoch() < std::chrono::nanoseconds{reconciler_paused_until_ns_.load()}) {
      std::this_thread::sleep_for(100ms);
      continue;
    }
    std::string failpoints;
    {
      std::lock_guard lock(mutex_);
      failpoints = std::exchange(reconciler_failpoints_, "");
    }
    RunReconciler(failpoints);
    for (int i = 0; i < 10 && reconciler_timer_on_; ++i) std::this_thread::sleep_for(100ms);
  }
}

void ChaosStack::StopReconcilerTimer() {
  reconciler_timer_on_ = false;
  if (reconciler_timer_.joinable()) reconciler_timer_.join();
}

void ChaosStack::HealAll() {
  {
    std::lock_guard lock(mutex_);
    if (!start_failure_.empty()) throw std::runtime_error("the supervisor could not restart a daemon: " + start_failure_);
  }
  pg_links_.Pass();
  kafka_links_.Pass();
  acquirer_links_.Pass();
  {
    std::lock_guard lock(mutex_);
    reconciler_failpoints_.clear();
    for (auto& slot : slots_) {
      slot.down_until = Clock::now();
      if (!slot.failpoints.empty()) slot.failpoints.clear();
    }
  }
  // Every daemon up again (the supervisor starts what is down), and the acquirer healthy.
  const auto deadline = Clock::now() + 30s;
  while (!SetAcquirerFaults("{}")) {
    if (Clock::now() > deadline) throw std::runtime_error("acquirer-sim did not come back");
    std::this_thread::sleep_for(100ms);
  }
}

std::vector<std::uint16_t> ChaosStack::ApiPorts() const { return api_ports_; }

namespace {
// postgresql://postgres@127.0.0.1:P1,127.0.0.1:P2/postgres?target_session_attrs=read-write, or one host.
std::string MultiHostUrl(const std::vector<int>& ports) {
  std::string hosts;
  for (const int port : ports) hosts += (hosts.empty() ? "" : ",") + std::string("127.0.0.1:") + std::to_string(port);
  return "postgresql://postgres@" + hosts + "/postgres?target_session_attrs=read-write";
}
}  // namespace

std::string ChaosStack::database_url() const {
  if (!high_availability()) return MultiHostUrl({pg_port_});
  std::vector<int> ports;
  std::ifstream env(state_ / "patroni" / "cluster.env");
  for (std::string line; std::getline(env, line);) {
    if (!line.starts_with("PATRONI_PG_PORTS=")) continue;
    std::istringstream words(line.substr(line.find('=') + 1));
    for (std::string word; words >> word;) {
      std::erase(word, '\'');
      ports.push_back(std::stoi(word));
    }
  }
  return MultiHostUrl(ports);
}

std::string ChaosStack::DaemonDatabaseUrl() const {
  std::vector<int> ports;
  for (const auto& proxy : pg_proxies_) ports.push_back(proxy->port());
  return MultiHostUrl(ports);
}

std::string ChaosStack::kafka_bootstrap() const {
  std::string list;
  for (const auto& proxy : broker_proxies_) list += (list.empty() ? "" : ",") + std::string("127.0.0.1:") + std::to_string(proxy->port());
  return list;
}

}  // namespace charge_outbox::chaos
