// ChaosStack: the whole system as separate processes, with a handle on every part a fault can hit.
//
//   PostgreSQL and a single-node Kafka of its own (so that it may restart them), started with the
//   project's scripts; a FaultProxy in front of each of them and of the acquirer, and every daemon
//   connects through the proxies; acquirer-sim on a fixed port with its ledger on disk; two charge-api,
//   two outbox-relay; the reconciler as a process run on a timer, as its CronJob runs it.
//
//   Or the topology users run (UseHighAvailability): PostgreSQL under Patroni, two nodes and one etcd
//   member (deploy/local/lib/patroni.sh), and three KRaft brokers (kafka_cluster.sh) with replication
//   factor 3 and min.insync.replicas 2. A proxy stands in front of every PostgreSQL node and every broker
//   (each broker advertises its proxy, so replication between brokers crosses it too); the daemons get
//   the multi-host URL with target_session_attrs=read-write and the list of brokers, as a release does.
//
// A supervisor thread keeps each daemon in the state the fault schedule wants: a daemon killed (or one
// that crashed at a failpoint) is started again once its down time is over, without failpoints.
//
// The acquirer's dialect (UseAcquirerDialect): our protocol, or Stripe's API, which acquirer-sim serves beside
// ours on the same ledger. With Stripe every daemon speaks it (ACQUIRER_KIND=stripe), and acquirer-sim
// forgets idempotency keys within the run and rate-limits searches (StripeSettings).
//
// One charge-api may run with its wall clock off by minutes (libfaketime, as Debian's faketime sets it per
// process): only the database's clock may decide order and deadlines, and the checker's invariants hold
// the product to it.
//
// Thread-safe: the workload, the fault schedule and the supervisor call it concurrently.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "child_process.hpp"
#include "fault_proxy.hpp"

namespace charge_outbox::chaos {

struct Binaries {
  std::string project_root;
  std::string charge_api, outbox_relay, reconciler, acquirer_sim, charge_migrate;
};

struct Merchant {
  std::string id;
  std::string api_key;
};

enum class Daemon { kChargeApi, kRelay, kAcquirer };
std::string_view ToString(Daemon daemon);

enum class AcquirerDialect { kNative, kStripe };
std::string_view ToString(AcquirerDialect dialect);

// What a Stripe run tells acquirer-sim and the daemons, derived from the run's deadline so that each rule
// the daemons enforce holds and each Stripe limit bites within the run:
//   - the sim forgets a key `key_retention` after its first use (a create with it then makes a NEW
//     PaymentIntent), twice the deadline; the daemons are told the same retention, and the deadline stays
//     within it (retention - retention/24 - the request timeout), which charge-api and the reconciler check;
//   - the daemons' search lag is the reconciler's visibility window; the fault schedule's search lag stays
//     under it (a search that finds nothing proves nothing for that long);
//   - the sim allows `sim_search_rate_limit` searches per second to the one merchant every daemon uses; each
//     process paces itself, and their sum (two charge-api and `reconcilers_budgeted` reconciler processes
//     at once) stays within it, so the limit itself answers no 429 (the schedule's 429 profile still does).
struct StripeSettings {
  std::chrono::milliseconds key_retention{0};
  std::chrono::milliseconds search_lag{0};
  int sim_search_rate_limit = 0;
  int charge_api_search_rate = 0;
  int reconciler_search_rate = 0;
  int reconcilers_budgeted = 0;
  // The reconciler's claimed batch, searched at its pace well within its claim lease.
  int reconciler_batch_size = 0;
};

// The proxies in front of one dependency: every PostgreSQL node, every broker, or the acquirer. A fault
// on the link is a fault on each of them (the database away is away whichever node is primary), except
// on a node that is down: its proxy refuses connections, as a dead host's port does, until it is up again.
// (A proxy that accepted and then reset would be a fault of its own: libpq then gives up on the remaining
// hosts of a multi-host URL.) Thread-safe.
class LinkGroup {
 public:
  void Add(testing::FaultProxy& proxy);
  void Pass() { Each([](testing::FaultProxy& p) { p.Pass(); }); }
  void Delay(std::chrono::milliseconds delay) { Each([delay](testing::FaultProxy& p) { p.Delay(delay); }); }
  void BlackHole() { Each([](testing::FaultProxy& p) { p.BlackHole(); }); }
  void Reset() { Each([](testing::FaultProxy& p) { p.Reset(); }); }
  void BlackHoleOne(std::size_t index);  // one proxy only (one broker partitioned away)
  void PassOne(std::size_t index);
  void Down(std::size_t index);  // refuses from now on, whatever the link's faults
  void Up(std::size_t index);    // passes again

 private:
  void Each(const std::function<void(testing::FaultProxy&)>& action);

  std::mutex mutex_;
  std::vector<testing::FaultProxy*> proxies_;
  std::vector<bool> down_;
};

class ChaosStack {
 public:
  ChaosStack(Binaries binaries, std::filesystem::path state_dir, std::ostream& log);
  ~ChaosStack();

  // Before Start: charge-api #1's wall clock runs `offset` off ("+7m", libfaketime's FAKETIME syntax; its
  // monotonic clock is left alone). Throws if libfaketime is not installed (deploy/local/install-deps).
  void SkewChargeApiClock(const std::string& offset);
  // Before Start: the business deadline of charge-api and the reconciler (`charge.deadline`,
  // `reconciler.deadline`). Short, so that charges cross it under load: past it a capture is voided, never
  // kept, and a stalled actor's stale capture must not undo that void.
  void SetDeadline(std::chrono::seconds deadline) { deadline_ = deadline; }
  // Before Start: the HA topology, with `replication` "sync" (Patroni's synchronous_mode), "strict"
  // (synchronous_mode_strict) or "async".
  void UseHighAvailability(const std::string& replication);
  bool high_availability() const { return !replication_.empty(); }
  const std::string& replication() const { return replication_; }
  // Before Start (after SetDeadline): the dialect every daemon speaks to acquirer-sim.
  void UseAcquirerDialect(AcquirerDialect dialect);
  AcquirerDialect acquirer_dialect() const { return dialect_; }
  // Stripe only (all zero with our protocol).
  const StripeSettings& stripe() const { return stripe_; }
  // How long a search may lag and a lookup's "not found" proves nothing (RECONCILER_VISIBILITY_WINDOW).
  static constexpr std::chrono::milliseconds kVisibilityWindow{3000};

  // PostgreSQL, Kafka, proxies, schema, merchants, every daemon, the supervisor and the reconciler timer.
  void Start();
  // Stops every process this stack started; their output is kept in the state directory's logs/.
  void Stop();

  // Daemons: `index` is 0 or 1 for charge-api and the relay, 0 for the acquirer.
  int Count(Daemon daemon) const;
  // SIGKILL; the supervisor starts it again after `down_for`.
  void Kill(Daemon daemon, int index, std::chrono::milliseconds down_for);
  // Restarted now with FAILPOINTS=`failpoints`; once it dies there, it comes back without them.
  void RestartWithFailpoints(Daemon daemon, int index, const std::string& failpoints);
  bool Running(Daemon daemon, int index);

  // acquirer-sim's fault profile (PUT /admin/faults); "{}" is a healthy acquirer.
  bool SetAcquirerFaults(const std::string& profile_json);
  // acquirer-sim's request counts by kind (GET /admin/stats: capture, lookup, search, ...); empty if it
  // did not answer. They count since its last start: a kill loses them.
  std::map<std::string, std::int64_t> AcquirerRequestCounts();
  // pg_ctl stop/start, and the broker stopped and started on the same ports (data kept). In the HA
  // topology: the primary's PostgreSQL crashes (SIGKILL of its processes; Patroni starts it again or fails
  // over), and the broker leading the most partitions is SIGKILLed and started again.
  void RestartPostgres();
  void RestartKafka();

  LinkGroup& postgres_link() { return pg_links_; }
  LinkGroup& kafka_link() { return kafka_links_; }
  LinkGroup& acquirer_link() { return acquirer_links_; }

  // The HA topology's own faults (deploy/local/lib/patroni.sh and kafka_cluster.sh do the work).
  std::string PostgresPrimary();                        // "pg1", ...; empty while none
  std::string PostgresStandby();                        // a node that is not the primary
  bool PostgresWhole(std::chrono::seconds within);      // every node up, a leader, a sync standby (sync)
  void KillPostgresNode(const std::string& node);       // SIGKILL of Patroni and its PostgreSQL
  void StartPostgresNode(const std::string& node);      // it rejoins (pg_rewind or a fresh copy)
  // SIGSTOP of a primary's WAL senders, until the node is killed: its standby falls behind, as over a slow
  // network. (Stopping the standby's receiver instead loses nothing: the kernel keeps receiving into its
  // socket.)
  void StopWalSenders(const std::string& node);
  void KillEtcd();
  void StartEtcd();
  int BusiestBroker();                                  // the node (1..3) leading the most partitions
  void KillBroker(int node);
  void StartBroker(int node);                           // and waits until it is registered and unfenced
  int brokers() const { return static_cast<int>(broker_proxies_.size()); }
  // A transaction that writes WAL commits through the direct multi-host URL within a second.
  bool PostgresWritable();

  // The reconciler's next timed runs use `failpoints` once (a run that crashes there).
  void ArmReconcilerFailpoint(const std::string& failpoints);
  // Runs one reconciler process now (besides the timer) and returns its exit status.
  int RunReconcilerOnce();
  // A second run beside the timer's, as an operator's `kubectl create job --from=cronjob/...` would be,
  // with `failpoints` (a crash or a stall); blocks until it ends and returns its exit status.
  int RunReconcilerBeside(const std::string& failpoints);
  // `reconciler window --from --to` now, during the load; blocks until it ends and returns its exit status.
  int RunWindowReport(std::chrono::system_clock::time_point from, std::chrono::system_clock::time_point to);
  void StopReconcilerTimer();
  // The most reconciler processes that ran at once (timer, second runs, window reports, settling).
  int max_concurrent_reconcilers() const { return max_reconcilers_; }
  // No timed run starts for `how_long` (an SRE suspending the CronJob for a manual run); one in progress
  // goes on.
  void PauseReconcilerTimer(std::chrono::milliseconds how_long);

  // Heals everything: proxies pass, the acquirer is healthy, every daemon runs, no failpoints armed.
  void HealAll();

  std::vector<std::uint16_t> ApiPorts() const;
  std::uint16_t acquirer_port() const { return acquirer_port_; }
  const std::vector<Merchant>& merchants() const { return merchants_; }
  std::string database_url() const;  // direct, not through the proxies: for the checker
  std::string kafka_bootstrap() const;
  const std::string& topic() const { return topic_; }
  const std::filesystem::path& state_dir() const { return state_; }

 private:
  struct Slot {
    Daemon daemon;
    int index = 0;
    std::unique_ptr<testing::ChildProcess> process;
    std::chrono::steady_clock::time_point down_until{};
    std::string failpoints;  // for the next start only
    int starts = 0;
  };

  void StartPostgres();
  void StartKafka();
  std::string DaemonDatabaseUrl() const;  // through the proxies
  void StartProcess(Slot& slot);
  void Reap(Slot& slot);
  void Supervise();
  void ReconcilerTimer();
  int RunReconciler(const std::string& failpoints, std::vector<std::string> args = {});
  testing::EnvChanges Environment(const Slot& slot) const;
  // The acquirer client's settings for charge-api and the reconciler: timeouts, retries, the dialect and,
  // with Stripe, its knobs with this process's share of the searches.
  testing::EnvChanges AcquirerClientSettings(int search_rate) const;
  std::string Shell(const std::string& script, std::chrono::seconds timeout = std::chrono::seconds{180});
  Slot& SlotOf(Daemon daemon, int index);

  Binaries bin_;
  std::filesystem::path state_;
  std::ostream& log_;
  std::mutex mutex_;  // slots, reconciler failpoints, log
  std::vector<Slot> slots_;
  std::vector<Merchant> merchants_;
  std::string acquirer_key_ = "ak_chaos";
  std::string topic_ = "charge-events";
  int pg_port_ = 0, kafka_port_ = 0, kafka_controller_port_ = 0;
  std::uint16_t acquirer_port_ = 0;
  std::vector<std::uint16_t> api_ports_;
  std::vector<std::uint16_t> admin_ports_;  // charge-api's /readyz and /metrics
  // One per PostgreSQL node (one in the single topology) and one per broker, in node order.
  std::vector<std::unique_ptr<testing::FaultProxy>> pg_proxies_, broker_proxies_;
  std::unique_ptr<testing::FaultProxy> acquirer_proxy_;
  LinkGroup pg_links_, kafka_links_, acquirer_links_;
  std::string replication_;  // empty: the single topology
  std::string reconciler_failpoints_;
  std::string clock_skew_;  // charge-api #1's FAKETIME; empty: none
  std::chrono::seconds deadline_{3600};
  AcquirerDialect dialect_ = AcquirerDialect::kNative;
  StripeSettings stripe_;
  std::atomic<int> reconcilers_{0}, max_reconcilers_{0};
  std::string start_failure_;  // the first restart the supervisor could not make, under mutex_
  std::atomic<bool> stopping_{false};
  std::atomic<bool> reconciler_timer_on_{false};
  std::atomic<std::int64_t> reconciler_paused_until_ns_{0};  // steady_clock, since its epoch
  std::thread supervisor_, reconciler_timer_;
  bool started_ = false;
};

}  // namespace charge_outbox::chaos
