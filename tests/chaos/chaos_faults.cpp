#include "chaos_faults.hpp"

#include <algorithm>
#include <iomanip>
#include <stdexcept>

namespace charge_outbox::chaos {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

const FaultSchedule::Profile kProfiles[] = {
    {"timeouts after capture", R"("timeout_rate": 0.3, "timeout_delay_ms": 2500)"},
    {"answers dropped after capture", R"("drop_rate": 0.3)"},
    {"503", R"("error_rate": 0.4, "retry_after_s": 1)"},
    {"429", R"("throttle_rate": 0.4, "retry_after_s": 1)"},
    {"latency", R"("latency": {"distribution": "lognormal", "median_ms": 80, "p99_ms": 900})"},
    {"visibility delay", R"("visibility_delay_ms": 2000)"},
};
// Stripe's own troubles, drawn besides those: a 500 the endpoint stores under the key and replays to every
// retry, whether or not it made the PaymentIntent first (the key can then never tell; only a lookup can).
// The search lag is kept to ChaosStack::StripeSettings::search_lag by its constructor.
const FaultSchedule::Profile kStripeProfiles[] = {
    {"stored 500s", R"("server_error_rate": 0.3)"},
};
constexpr const char* kApplyTo[] = {
    R"(["capture"])", R"(["capture", "replay"])", R"(["capture", "replay", "lookup"])", R"(["lookup", "replay"])",
};
constexpr const char* kChargeApiFailpoints[] = {"charge.before_intent_commit", "charge.after_intent_commit",
                                                "charge.after_acquirer_response"};
constexpr const char* kReconcilerFailpoints[] = {"reconciler.after_acquirer_lookup", "reconciler.before_transition"};
// A second run beside the timer's: clean, dead at a failpoint, or stalled there past its claim (5 s), so
// that another run takes its charges over while it holds what it read.
constexpr const char* kSecondRunFailpoints[] = {
    "", "reconciler.after_acquirer_lookup=crash", "reconciler.before_transition=crash",
    "reconciler.after_acquirer_lookup=sleep(7000)", "reconciler.before_transition=sleep(7000)"};

}  // namespace

// One roll in each family's range of InjectOne (a link fault on each of the three links), Kafka's
// restart first so that it is not refused for coming within kKafkaRestartSpacing of another, and the
// staged run across the deadline next: later, an acquirer fault drawn before it (a kill, a restart that
// drops its profile) could still be in effect and leave nothing pending to stage.
constexpr std::uint64_t kFamilyRolls[] = {0, 14, 26, 33, 38, 42, 48, 62, 70, 78, 86, 92, 100, 104, 106, 111, 117, 121};
constexpr std::uint64_t kStagedRoll = 104;
constexpr std::uint64_t kProfileRoll = 48;  // an acquirer profile
// From a kill's end until acquirer-sim answers again.
constexpr std::chrono::milliseconds kAcquirerStart{1000};
constexpr std::uint64_t kRollRange = 125;
// The HA topology's random faults, after the others: the standby node killed, etcd killed, a black hole
// to one broker.
constexpr std::uint64_t kHaFamilyRolls[] = {125, 130, 135};
constexpr std::uint64_t kHaRollRange = 145;

FaultSchedule::FaultSchedule(ChaosStack& stack, FaultOptions options, std::uint64_t seed, std::ostream& log)
    : stack_(stack), options_(options), log_(log), rng_(seed), cadence_rng_(seed ^ 0x9E3779B97F4A7C15ULL) {
  profiles_.assign(std::begin(kProfiles), std::end(kProfiles));
  if (stack_.acquirer_dialect() == AcquirerDialect::kStripe) {
    profiles_.insert(profiles_.end(), std::begin(kStripeProfiles), std::end(kStripeProfiles));
    // Within the reconciler's visibility window: a search that lags longer would let "not found" stand
    // for a PaymentIntent that exists, which the daemons are told can not happen (search_lag).
    const auto lag = stack_.stripe().search_lag - std::chrono::milliseconds{500};
    profiles_.push_back({"search lag", R"("search_lag_ms": )" + std::to_string(lag.count())});
  }
  first_rolls_.assign(std::begin(kFamilyRolls), std::end(kFamilyRolls));
  if (stack_.high_availability()) first_rolls_.insert(first_rolls_.end(), std::begin(kHaFamilyRolls), std::end(kHaFamilyRolls));
  // Stripe's own profiles are each met in the first pass too: one more profile roll apiece, which takes
  // them in turn.
  for (std::size_t i = std::size(kProfiles); i < profiles_.size(); ++i) {
    first_rolls_.push_back(kProfileRoll);
    first_profiles_.push_back(i);
  }
  std::shuffle(first_rolls_.begin(), first_rolls_.end(), rng_);
  std::erase(first_rolls_, kStagedRoll);
  first_rolls_.push_back(kStagedRoll);  // consumed from the back
  if (options_.restart_kafka) first_rolls_.push_back(97);  // consumed first
}

void FaultSchedule::StaleRunAcrossTheDeadline() {
  const auto piling = Between(4000, 7000);
  acquirer_staged_until_ = Clock::now() + piling + 12s;
  // The schedule suspended meanwhile, as an SRE does for a manual run: nothing resolves the pile early.
  stack_.PauseReconcilerTimer(piling + 12s);
  const int generation = ++profile_generation_;
  Note("reconciler runs across the deadline", "the schedule suspended, lookups failing for " +
                                                  std::to_string(piling.count()) +
                                      "ms, then a run stalled 7 s at before_transition and one 5.5 s later "
                                      "stalled 4 s after each void");
  // Every capture made and answered too late (its client hears 202), every lookup too: captures pile up
  // live at the acquirer and pending here, the older ones nearing their deadline.
  stack_.SetAcquirerFaults(R"({"timeout_rate": 1.0, "timeout_delay_ms": 2500, "apply_to": ["capture", "replay", "lookup"]})");
  slow_.emplace_back([this, piling, generation] {
    std::this_thread::sleep_for(piling);
    if (profile_generation_ == generation) stack_.SetAcquirerFaults("{}");
    std::thread voider([this] {
      std::this_thread::sleep_for(5500ms);
      stack_.RunReconcilerBeside("reconciler.after_void=sleep(4000)");
    });
    stack_.RunReconcilerBeside("reconciler.before_transition=sleep(7000)");
    voider.join();
  });
}

std::uint64_t FaultSchedule::NextRoll() {
  if (first_rolls_.empty()) return rng_() % (stack_.high_availability() ? kHaRollRange : kRollRange);
  const auto roll = first_rolls_.back();
  first_rolls_.pop_back();
  return roll;
}

FaultSchedule::~FaultSchedule() {
  // Reached by unwinding when the run already failed: that failure is the one reported.
  try {
    Stop();
  } catch (const std::exception&) {
  }
}

void FaultSchedule::Start() {
  started_ = Clock::now();
  if (options_.drill == Drill::kNone) thread_ = std::thread([this] { Loop(); });
  if (stack_.high_availability()) cadence_ = std::thread([this] { HaCadence(); });
}

void FaultSchedule::Stop() {
  if (stop_.exchange(true)) return;
  if (thread_.joinable()) thread_.join();
  if (cadence_.joinable()) cadence_.join();
  for (auto& t : slow_) t.join();
  slow_.clear();
  stack_.HealAll();
  std::lock_guard lock(mutex_);
  if (!failure_.empty()) throw std::runtime_error("a fault could not be made or healed: " + failure_);
}

void FaultSchedule::Guarded(const std::string& what, const std::function<void()>& fault) {
  try {
    fault();
  } catch (const std::exception& e) {
    Note("FAILED: " + what, e.what());
    std::lock_guard lock(mutex_);
    if (failure_.empty()) failure_ = what + ": " + e.what();
  }
}

std::map<std::string, std::int64_t> FaultSchedule::injected() const {
  std::lock_guard lock(mutex_);
  return injected_;
}

std::vector<FailoverRecord> FaultSchedule::failovers() const {
  std::lock_guard lock(mutex_);
  return failovers_;
}

std::vector<BrokerLossRecord> FaultSchedule::broker_losses() const {
  std::lock_guard lock(mutex_);
  return broker_losses_;
}

bool FaultSchedule::Wait(std::chrono::milliseconds how_long) {
  const auto until = Clock::now() + how_long;
  while (Clock::now() < until) {
    if (stop_) return false;
    std::this_thread::sleep_for(20ms);
  }
  return !stop_;
}

void FaultSchedule::HaCadence() {
  bool failover_next = options_.drill != Drill::kBrokerLoss;
  const auto gap = static_cast<int>(options_.ha_gap.count());
  while (Wait(std::chrono::milliseconds{gap / 2 + static_cast<int>(cadence_rng_() % static_cast<std::uint64_t>(gap + 1))})) {
    if (failover_next) {
      Guarded("failover", [this] { Failover(); });
    } else {
      Guarded("broker loss", [this] { BrokerLoss(); });
    }
    if (options_.drill == Drill::kNone) failover_next = !failover_next;
  }
}

void FaultSchedule::Failover() {
  std::lock_guard topology(database_topology_);
  // Patroni promotes only a synchronous standby that is up to date: a failover begins from a whole cluster.
  if (!stack_.PostgresWhole(90s)) {
    Note("failover skipped", "the cluster was not whole after 90 s");
    return;
  }
  const auto primary = stack_.PostgresPrimary();
  if (primary.empty()) return;
  // With asynchronous replication, the standby held behind for a second first (the primary's WAL senders
  // stopped): what the primary commits meanwhile is acknowledged to clients and, after the failover, gone.
  const bool lagging = stack_.replication() == "async";
  const auto lagging_from = Clock::now();
  if (lagging) {
    stack_.StopWalSenders(primary);
    std::this_thread::sleep_for(1s);
  }
  const auto down = std::chrono::milliseconds{2000 + static_cast<int>(cadence_rng_() % 4001)};
  Note("kill the primary (failover)", primary + (lagging ? ", its standby held 1 s behind" : "") + ", back " +
                                          std::to_string(down.count()) + "ms after the new primary writes");
  stack_.KillPostgresNode(primary);
  const auto killed = Clock::now();  // its postmaster has exited
  FailoverRecord record{primary, lagging ? lagging_from : killed, killed, {}, false};
  // When a write first commits through the multi-host URL: the new primary accepts writes. Patroni
  // promotes no standby further behind than maximum_lag_on_failover (1 MB): then nothing is writable until
  // the old primary's machine is back, and after 30 s it is started again, as its owner would.
  bool restarted = false;
  while (Clock::now() - record.killed < 120s) {
    if (stack_.PostgresWritable()) {
      record.writable = Clock::now();
      record.became_writable = true;
      break;
    }
    if (!restarted && Clock::now() - record.killed > 30s) {
      Note("failover refused", "no standby promoted within 30 s (too far behind?): " + primary + " started again");
      stack_.StartPostgresNode(primary);
      restarted = true;
    }
    std::this_thread::sleep_for(100ms);
  }
  {
    std::lock_guard lock(mutex_);
    failovers_.push_back(record);
  }
  if (!restarted) {
    std::this_thread::sleep_for(down);
    stack_.StartPostgresNode(primary);
  }
  stack_.PostgresWhole(120s);
}

void FaultSchedule::BrokerLoss() {
  std::lock_guard topology(broker_topology_);
  const int node = stack_.BusiestBroker();
  const auto down = std::chrono::milliseconds{2000 + static_cast<int>(cadence_rng_() % 6001)};
  Note("kill the broker leading the most partitions", "node " + std::to_string(node) + ", down " +
                                                          std::to_string(down.count()) + "ms");
  BrokerLossRecord record{node, Clock::now(), {}};
  stack_.KillBroker(node);
  std::this_thread::sleep_for(down);
  stack_.StartBroker(node);
  record.back = Clock::now();
  std::lock_guard lock(mutex_);
  broker_losses_.push_back(record);
}

void FaultSchedule::KillStandby(std::chrono::milliseconds down) {
  std::unique_lock topology(database_topology_, std::try_to_lock);
  if (!topology.owns_lock() || !stack_.PostgresWhole(2s)) return;
  const auto standby = stack_.PostgresStandby();
  if (standby.empty()) return;
  Note("kill the standby node", standby + ", down " + std::to_string(down.count()) + "ms");
  stack_.KillPostgresNode(standby);
  std::this_thread::sleep_for(down);
  stack_.StartPostgresNode(standby);
  stack_.PostgresWhole(120s);
}

void FaultSchedule::KillEtcd(std::chrono::milliseconds down) {
  std::unique_lock topology(database_topology_, std::try_to_lock);
  if (!topology.owns_lock() || !stack_.PostgresWhole(2s)) return;
  Note("kill the etcd member", "down " + std::to_string(down.count()) + "ms");
  stack_.KillEtcd();
  std::this_thread::sleep_for(down);
  stack_.StartEtcd();
  stack_.PostgresWhole(120s);
}

std::chrono::milliseconds FaultSchedule::Between(int min_ms, int max_ms) {
  return std::chrono::milliseconds{min_ms + static_cast<int>(rng_() % static_cast<std::uint64_t>(max_ms - min_ms + 1))};
}

void FaultSchedule::Note(const std::string& kind, const std::string& detail) {
  std::lock_guard lock(mutex_);
  ++injected_[kind];
  const auto at = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started_).count();
  log_ << "  fault +" << std::setw(6) << at << "ms  " << kind << (detail.empty() ? "" : ": " + detail) << "\n";
}

void FaultSchedule::HealLater(std::chrono::milliseconds after, std::function<void()> action) {
  heals_.push_back(Heal{Clock::now() + after, std::move(action)});
}

void FaultSchedule::Loop() {
  auto next = Clock::now() + Between(200, 2 * static_cast<int>(options_.mean_gap.count()));
  while (!stop_) {
    const auto now = Clock::now();
    for (auto it = heals_.begin(); it != heals_.end();) {
      if (it->at <= now) {
        it->action();
        it = heals_.erase(it);
      } else {
        ++it;
      }
    }
    if (now >= next) {
      InjectOne();
      // Twice as often while the first pass through the families lasts, so that a short run meets each.
      const int mean_ms = static_cast<int>(options_.mean_gap.count()) / (first_rolls_.empty() ? 1 : 2);
      next = now + Between(100, 2 * mean_ms);
    }
    std::this_thread::sleep_for(20ms);
  }
  for (auto& heal : heals_) heal.action();
  heals_.clear();
}

void FaultSchedule::InjectOne() {
  const bool first_pass = !first_rolls_.empty();
  const auto roll = NextRoll();
  // Faults on the acquirer (kills, profiles, the slow database's profile) would undo a staged scenario's:
  // skipped while one runs, and in the first pass tried again at its end, so that a short run meets each.
  const bool on_the_acquirer = (roll >= 38 && roll < 62) || (roll >= 106 && roll < 111) || (roll >= 121 && roll < kRollRange);
  if (on_the_acquirer && Clock::now() < acquirer_staged_until_) {
    if (first_pass) first_rolls_.insert(first_rolls_.begin(), roll);
    return;
  }
  auto index = [&](int n) { return static_cast<int>(rng_() % static_cast<std::uint64_t>(n)); };
  if (roll >= kRollRange) {
    if (roll < 130) {
      const auto down = Between(2000, 6000);
      slow_.emplace_back([this, down] { Guarded("kill the standby node", [&] { KillStandby(down); }); });
    } else if (roll < 135) {
      const auto down = Between(2000, 6000);
      slow_.emplace_back([this, down] { Guarded("kill the etcd member", [&] { KillEtcd(down); }); });
    } else {
      const auto node = static_cast<std::size_t>(index(stack_.brokers()));
      const auto lasts = Between(1000, 4000);
      Note("black hole to one broker", "node " + std::to_string(node + 1) + " for " + std::to_string(lasts.count()) + "ms");
      stack_.kafka_link().BlackHoleOne(node);
      HealLater(lasts, [this, node] { stack_.kafka_link().PassOne(node); });
    }
    return;
  }
  if (roll < 14) {
    const int i = index(2);
    const auto down = Between(300, 3000);
    Note("kill charge-api", "#" + std::to_string(i) + ", down " + std::to_string(down.count()) + "ms");
    stack_.Kill(Daemon::kChargeApi, i, down);
  } else if (roll < 26) {
    const int i = index(2);
    const std::string point = kChargeApiFailpoints[index(3)];
    Note("charge-api crash at " + point, "#" + std::to_string(i));
    stack_.RestartWithFailpoints(Daemon::kChargeApi, i, point + "=crash");
  } else if (roll < 33) {
    const int i = index(2);
    const auto down = Between(300, 3000);
    Note("kill outbox-relay", "#" + std::to_string(i) + ", down " + std::to_string(down.count()) + "ms");
    stack_.Kill(Daemon::kRelay, i, down);
  } else if (roll < 38) {
    const int i = index(2);
    Note("outbox-relay crash at relay.after_publish_before_mark", "#" + std::to_string(i));
    stack_.RestartWithFailpoints(Daemon::kRelay, i, "relay.after_publish_before_mark=crash");
  } else if (roll < 42) {
    const auto down = Between(1000, 5000);
    Note("kill acquirer-sim", "down " + std::to_string(down.count()) + "ms");
    stack_.Kill(Daemon::kAcquirer, 0, down);
    acquirer_back_at_ = std::max(acquirer_back_at_, Clock::now() + down + kAcquirerStart);
  } else if (roll < 48) {
    // The combination that once told clients "no money was taken" while the acquirer held their capture:
    // answers dropped after capturing, then the acquirer gone while those clients retry.
    const auto dropping = Between(500, 1500);
    const auto down = Between(2000, 5000);
    Note("acquirer drops answers, then restarts",
         std::to_string(dropping.count()) + "ms of drops, down " + std::to_string(down.count()) + "ms");
    ++profile_generation_;
    stack_.SetAcquirerFaults(R"({"drop_rate": 0.5, "apply_to": ["capture", "replay"]})");
    HealLater(dropping, [this, down] { stack_.Kill(Daemon::kAcquirer, 0, down); });
    acquirer_back_at_ = std::max(acquirer_back_at_, Clock::now() + dropping + down + kAcquirerStart);
  } else if (roll < 62 && !first_profiles_.empty()) {
    // Stripe's own, in the first pass: on captures and their replays, where a stored 500 is stored, and
    // held like a staged scenario, so that the next acquirer fault does not end it at once. Not while the
    // acquirer is down or about to be killed (it would start again healthy): tried again at the pass's end.
    const auto& profile = profiles_[first_profiles_.back()];
    const std::string apply_to = kApplyTo[1];
    const auto json = "{" + profile.json + R"(, "apply_to": )" + apply_to + "}";
    if (Clock::now() < acquirer_back_at_ || !stack_.SetAcquirerFaults(json)) {
      first_rolls_.insert(first_rolls_.begin(), roll);
      return;
    }
    first_profiles_.pop_back();
    const auto lasts = Between(2000, 6000);
    acquirer_staged_until_ = Clock::now() + lasts;
    const int generation = ++profile_generation_;
    Note("acquirer " + profile.name, apply_to + " for " + std::to_string(lasts.count()) + "ms");
    HealLater(lasts, [this, generation] {
      if (profile_generation_ == generation) stack_.SetAcquirerFaults("{}");
    });
  } else if (roll < 62) {
    const auto& profile = profiles_[static_cast<std::size_t>(index(static_cast<int>(profiles_.size())))];
    const std::string apply_to = kApplyTo[index(static_cast<int>(std::size(kApplyTo)))];
    const auto lasts = Between(2000, 6000);
    const int generation = ++profile_generation_;
    const auto json = "{" + profile.json + R"(, "apply_to": )" + apply_to + "}";
    Note("acquirer " + profile.name, apply_to + " for " + std::to_string(lasts.count()) + "ms");
    stack_.SetAcquirerFaults(json);  // a dead acquirer misses it: it restarts healthy
    HealLater(lasts, [this, generation] {
      if (profile_generation_ == generation) stack_.SetAcquirerFaults("{}");
    });
  } else if (roll < 86) {
    const auto which = (roll - 62) / 8;
    auto& link = which == 0 ? stack_.postgres_link() : which == 1 ? stack_.kafka_link() : stack_.acquirer_link();
    const std::string name = which == 0 ? "PostgreSQL" : which == 1 ? "Kafka" : "acquirer";
    const int mode = index(3);
    if (mode == 0) {
      const auto delay = Between(50, 300);
      const auto lasts = Between(1000, 4000);
      Note("link delay to " + name, std::to_string(delay.count()) + "ms for " + std::to_string(lasts.count()) + "ms");
      link.Delay(delay);
      HealLater(lasts, [&link] { link.Pass(); });
    } else if (mode == 1) {
      const auto lasts = Between(500, 3000);
      Note("black hole to " + name, std::to_string(lasts.count()) + "ms");
      link.BlackHole();
      HealLater(lasts, [&link] { link.Pass(); });
    } else {
      Note("connections reset to " + name, "");
      link.Reset();
      HealLater(50ms, [&link] { link.Pass(); });
    }
  } else if (roll < 92) {
    const std::string point = kReconcilerFailpoints[index(2)];
    Note("reconciler crash at " + point, "");
    stack_.ArmReconcilerFailpoint(point + "=crash");
  } else if (roll < 97) {
    if (postgres_restarting_.exchange(true)) return;
    slow_.emplace_back([this] {
      Guarded("restart PostgreSQL", [this] {
        if (stack_.high_availability()) {
          std::unique_lock topology(database_topology_, std::try_to_lock);
          if (topology.owns_lock()) {
            Note("crash of the primary's PostgreSQL", "Patroni starts it again");
            stack_.RestartPostgres();
            stack_.PostgresWhole(120s);
          }
        } else {
          Note("restart PostgreSQL", "");
          stack_.RestartPostgres();
        }
      });
      postgres_restarting_ = false;
    });
  } else if (roll >= 100 && roll < 104) {
    const std::string failpoints = kSecondRunFailpoints[index(static_cast<int>(std::size(kSecondRunFailpoints)))];
    Note("a second reconciler run", failpoints.empty() ? "clean" : failpoints);
    slow_.emplace_back([this, failpoints] { stack_.RunReconcilerBeside(failpoints); });
  } else if (roll >= 104 && roll < 106) {
    StaleRunAcrossTheDeadline();
  } else if (roll >= 106 && roll < 111) {
    // Every database round trip slower than charge-api's lease (3 s) and near the reconciler's claim (5 s),
    // while the acquirer times out or fails: owners lose their charges mid-work to takeovers.
    const auto delay = Between(1500, 3000);
    const auto lasts = Between(3000, 8000);
    const bool timeouts = index(2) == 0;
    const int generation = ++profile_generation_;
    Note("slow database during acquirer faults", std::to_string(delay.count()) + "ms each way for " +
                                                     std::to_string(lasts.count()) + "ms, acquirer " +
                                                     (timeouts ? "timeouts after capture" : "503"));
    stack_.SetAcquirerFaults(timeouts ? R"({"timeout_rate": 0.4, "timeout_delay_ms": 2500, "apply_to": ["capture", "replay"]})"
                                      : R"({"error_rate": 0.4, "retry_after_s": 1, "apply_to": ["capture", "replay", "lookup"]})");
    stack_.postgres_link().Delay(delay);
    HealLater(lasts, [this, generation] {
      stack_.postgres_link().Pass();
      if (profile_generation_ == generation) stack_.SetAcquirerFaults("{}");
    });
  } else if (roll >= 121) {
    // Every capture slow but answered (below charge-api's 1 s request timeout): its two connections serve
    // fewer than the clients send, and the charges queued more than a second behind them wait out each
    // attempt's time, 503 acquirer-busy after their intent with nothing sent (those that get a connection
    // late time out on it: unknown, 202). A client that leaves at the 503 must never be charged behind its
    // back.
    const auto lasts = Between(4000, 7000);
    const int generation = ++profile_generation_;
    // Held like a staged scenario: a kill or another profile drawn meanwhile would end it at once.
    acquirer_staged_until_ = Clock::now() + lasts;
    Note("acquirer slow enough to fill our queue", "captures 500-900ms for " + std::to_string(lasts.count()) + "ms");
    stack_.SetAcquirerFaults(R"({"latency": {"distribution": "uniform", "min_ms": 500, "max_ms": 900}, "apply_to": ["capture"]})");
    HealLater(lasts, [this, generation] {
      if (profile_generation_ == generation) stack_.SetAcquirerFaults("{}");
    });
  } else if (roll >= 117) {
    // The issue 41 outage: PostgreSQL gone for longer than charge-api waits for it (its retries of 2 s
    // calls), so that replays, GETs and new keys are answered 503 while captures stand in the record.
    const auto lasts = Between(3000, 6000);
    Note("database away", "black hole to PostgreSQL for " + std::to_string(lasts.count()) + "ms");
    stack_.postgres_link().BlackHole();
    HealLater(lasts, [this] { stack_.postgres_link().Pass(); });
  } else if (roll >= 111) {
    // The window report on a recent window: one that has not settled yet (it must flag nothing), or one
    // that has (its flags must be discrepancies the ledger shows).
    const bool settled = index(2) == 0;
    const auto to = std::chrono::system_clock::now() - (settled ? std::chrono::seconds{5} : std::chrono::seconds{0});
    const auto from = to - std::chrono::seconds{20};
    Note("window report during the load", settled ? "a settled window" : "a window still open");
    slow_.emplace_back([this, from, to] { stack_.RunWindowReport(from, to); });
  } else {
    // A broker restart takes the JVM seconds to come back and the relays longer to catch up: one at a
    // time, and at most one per kKafkaRestartSpacing, so a short run sees one and a long run several.
    if (!options_.restart_kafka) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_kafka_restart_ < kKafkaRestartSpacing || kafka_restarting_.exchange(true)) return;
    last_kafka_restart_ = now;
    slow_.emplace_back([this] {
      Guarded("restart Kafka", [this] {
        if (stack_.high_availability()) {
          // A broker's restart is a broker loss like the cadence's: one broker down at a time.
          std::unique_lock topology(broker_topology_, std::try_to_lock);
          if (topology.owns_lock()) {
            Note("restart the busiest broker", "");
            stack_.RestartKafka();
          }
        } else {
          Note("restart Kafka", "");
          stack_.RestartKafka();
        }
      });
      kafka_restarting_ = false;
    });
  }
}

}  // namespace charge_outbox::chaos
