// FaultSchedule: faults drawn from the run's seed and injected while the workload runs, several at once.
// Each fault starts at a drawn moment and, where it has a duration, is healed by the schedule itself:
//
//   kill charge-api / outbox-relay / acquirer-sim (SIGKILL; back after a drawn down time; a dead
//   acquirer's port refuses connections), a restart with a failpoint set to crash (charge-api: each of
//   its three points; relay: after publish, before mark; reconciler: after its lookup, before its
//   transition), an acquirer fault profile for a while (timeouts after capture, dropped answers after
//   capture, 503, 429, latency, visibility delay; on captures, replays and lookups), a link fault on the
//   proxy to PostgreSQL, Kafka or the acquirer (latency, resets, a black hole for a while), a PostgreSQL
//   restart, a Kafka broker restart; and (issue 41) a second reconciler run beside the timer's with a crash
//   or a stall at its failpoints, a database slower than the leases while the acquirer is in trouble, and
//   the window report run on a recent window during the load.
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

struct FaultOptions {
  std::chrono::milliseconds mean_gap{1200};  // between the starts of two faults
  bool restart_kafka = true;                 // the slowest fault (a JVM start): at most once per run
};

class FaultSchedule {
 public:
  FaultSchedule(ChaosStack& stack, FaultOptions options, std::uint64_t seed, std::ostream& log);
  ~FaultSchedule();

  void Start();
  // No new fault; every one in effect is healed (ChaosStack::HealAll) before it returns.
  void Stop();

  // Faults injected, by kind.
  std::map<std::string, std::int64_t> injected() const;

 private:
  struct Heal {
    std::chrono::steady_clock::time_point at;
    std::function<void()> action;
  };

  void Loop();
  void InjectOne();
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
  std::ostream& log_;
  std::mt19937_64 rng_;
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
  std::thread thread_;
  std::chrono::steady_clock::time_point started_{};
  std::vector<std::uint64_t> first_rolls_;  // one roll per family, consumed from the back
  // While a scenario needs the acquirer as it set it (StaleRunAcrossTheDeadline, a slow acquirer filling
  // our queue), no other fault touches the acquirer. Written and read by the injecting thread only.
  std::chrono::steady_clock::time_point acquirer_staged_until_{};
};

}  // namespace charge_outbox::chaos
