// FaultSchedule: faults drawn from the run's seed and injected while the workload runs, several at once.
// Each fault starts at a drawn moment and, where it has a duration, is healed by the schedule itself:
//
//   kill charge-api / outbox-relay / acquirer-sim (SIGKILL; back after a drawn down time; a dead
//   acquirer's port refuses connections), a restart with a failpoint set to crash (charge-api: each of
//   its three points; relay: after publish, before mark; reconciler: after its lookup, before its
//   transition), an acquirer fault profile for a while (timeouts after capture, dropped answers after
//   capture, 503, 429, latency, visibility delay, and with Stripe's dialect stored 500s and a search lag; on
//   captures, replays and lookups), a link fault on the
//   proxy to PostgreSQL, Kafka or the acquirer (latency, resets, a black hole for a while), a PostgreSQL
//   restart, a Kafka broker restart; and (issue 41) a second reconciler run beside the timer's with a crash
//   or a stall at its failpoints, a database slower than the leases while the acquirer is in trouble, and
//   the window report run on a recent window during the load.
//
// In the HA topology (ChaosStack::UseHighAvailability), a cadence of its own besides: a failover (SIGKILL
// of the primary node; with asynchronous replication its standby is held 1 s behind first, so that the
// failover forgets commits) and a broker loss (SIGKILL of the broker leading the most partitions) in
// turn, each one once the previous has healed; and among the random faults, SIGKILL of the standby node,
// of the etcd member, and a black hole to one broker. A drill runs the cadence of one kind alone, with no
// other fault, so that what a failover or a broker loss costs is measured without noise.
//
// The same seed draws the same sequence of faults; their exact moments follow the machine's clock.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "chaos_stack.hpp"

namespace charge_outbox::chaos {

enum class Drill { kNone, kFailover, kBrokerLoss };

struct FaultOptions {
  std::chrono::milliseconds mean_gap{1200};  // between the starts of two faults
  bool restart_kafka = true;                 // the slowest fault (a JVM start): at most once per run
  // HA topology: the pause after one failover or broker loss has healed before the next begins (drawn
  // between half and one and a half of it).
  std::chrono::milliseconds ha_gap{8000};
  Drill drill = Drill::kNone;
};

// A failover as it happened: the kill of the primary, and when a write first committed on the new one.
struct FailoverRecord {
  std::string node;  // the primary killed
  // lagging_from: when its standby began to fall behind (asynchronous replication; else the kill).
  std::chrono::steady_clock::time_point lagging_from, killed, writable;
  bool became_writable = false;
};

struct BrokerLossRecord {
  int node = 0;
  std::chrono::steady_clock::time_point killed, back;  // back: registered and unfenced again
};

class FaultSchedule {
 public:
  // An acquirer in trouble, and what it is in trouble with.
  struct Profile {
    std::string name;
    std::string json;  // fault profile members, without apply_to
  };

  FaultSchedule(ChaosStack& stack, FaultOptions options, std::uint64_t seed, std::ostream& log);
  ~FaultSchedule();

  void Start();
  // No new fault; every one in effect is healed (ChaosStack::HealAll) before it returns.
  void Stop();

  // Faults injected, by kind.
  std::map<std::string, std::int64_t> injected() const;
  std::vector<FailoverRecord> failovers() const;
  std::vector<BrokerLossRecord> broker_losses() const;

 private:
  struct Heal {
    std::chrono::steady_clock::time_point at;
    std::function<void()> action;
  };

  void Loop();
  void InjectOne();
  // The HA cadence: failovers and broker losses in turn (or the drill's kind alone), one at a time.
  void HaCadence();
  void Failover();
  void BrokerLoss();
  // SIGKILL of the standby node or of etcd, back after a drawn time, unless the database's topology is
  // already in a fault (then skipped).
  void KillStandby(std::chrono::milliseconds down);
  void KillEtcd(std::chrono::milliseconds down);
  // Runs `fault` on the calling thread (the cadence's, a slow fault's); a fault that could not be made or
  // healed (a script failed) is noted, and Stop reports the first one once everything is healed.
  void Guarded(const std::string& what, const std::function<void()>& fault);
  // Sleeps `how_long` in short steps; false if the schedule stopped meanwhile.
  bool Wait(std::chrono::milliseconds how_long);
  // Two runs across the charges' deadline, the schedule suspended meanwhile: captures left pending pile up
  // while lookups fail (the acquirer answers captures and lookups too late, after capturing); when lookups
  // heal, run A decides "captured" for the
  // oldest and stalls 7 s before writing it, past its claim (5 s) and, for some, past the deadline; run B
  // takes them over 5.5 s later, voids those now past the deadline and stalls 4 s after each void. A's
  // stale captures must not land over B's voids (chaos invariant 13).
  void StaleRunAcrossTheDeadline();
  // The roll of the next fault: the first injections go through every family once, in an order drawn
  // from the seed (so that even a short run meets each), then a fresh draw each time.
  std::uint64_t NextRoll();
  void Note(const std::string& kind, const std::string& detail);
  std::chrono::milliseconds Between(int min_ms, int max_ms);
  void HealLater(std::chrono::milliseconds after, std::function<void()> action);

  ChaosStack& stack_;
  FaultOptions options_;
  std::vector<Profile> profiles_;  // the acquirer profiles drawn: ours, and with Stripe its own besides
  std::ostream& log_;
  std::mt19937_64 rng_;          // the injecting thread's
  std::mt19937_64 cadence_rng_;  // the HA cadence's
  mutable std::mutex mutex_;
  std::map<std::string, std::int64_t> injected_;
  std::vector<Heal> heals_;
  std::vector<std::thread> slow_;  // restarts of PostgreSQL or Kafka, which take seconds
  std::atomic<bool> stop_{false};
  std::atomic<int> profile_generation_{0};
  static constexpr std::chrono::minutes kKafkaRestartSpacing{2};
  std::atomic<bool> kafka_restarting_{false};
  std::chrono::steady_clock::time_point last_kafka_restart_{};  // touched by the injecting thread only
  std::atomic<bool> postgres_restarting_{false};
  // One fault at a time on the database's topology (failover, standby, etcd, a crash of the primary's
  // PostgreSQL), and one broker down at a time: each waits for the last to heal.
  std::mutex database_topology_, broker_topology_;
  std::vector<FailoverRecord> failovers_;        // under mutex_
  std::vector<BrokerLossRecord> broker_losses_;  // under mutex_
  std::string failure_;                          // under mutex_: the first fault that failed
  std::thread thread_, cadence_;
  std::chrono::steady_clock::time_point started_{};
  std::vector<std::uint64_t> first_rolls_;  // one roll per family, consumed from the back
  std::vector<std::size_t> first_profiles_;  // profiles_ the first pass's extra profile rolls take, from the back
  // While a scenario needs the acquirer as it set it (StaleRunAcrossTheDeadline, a slow acquirer filling
  // our queue), no other fault touches the acquirer. Written and read by the injecting thread only.
  std::chrono::steady_clock::time_point acquirer_staged_until_{};
  // When acquirer-sim is up again after the kills drawn so far (injecting thread only): a profile set
  // before then is lost with the process.
  std::chrono::steady_clock::time_point acquirer_back_at_{};
};

}  // namespace charge_outbox::chaos
