// chaos: the whole stack under combined faults, and a checker that holds every invariant against the
// acquirer's ledger and what Kafka carries (tests/chaos/README.md).
//
//   chaos --short                          about a minute and a half, 5,000 charges (in tests/run)
//   chaos --charges 100000 --clients 32    the release check
//   chaos --seed N ...                     replays a run's fault sequence
//   chaos ... --clock-skew +7m             charge-api #1's wall clock that far off (the default; "none": off)
//   chaos ... --deadline 10                 the charges' deadline in seconds (the default: charges cross it)
//   chaos --ha [--replication sync|strict|async] ...   the HA topology: Patroni and three brokers, with
//                                          failovers and broker losses besides every other fault
//   chaos --ha --drill failover|broker-loss ...        that fault alone, at a cadence, measured
//   chaos ... --spread SECONDS              the intents' arrivals spread over at least that long (45)
//   chaos --acquirer stripe ...            every daemon speaks Stripe's dialect to acquirer-sim (native: ours)
//
// Exit status: 0 every invariant held; 1 a violation, or the system did not settle; 2 bad arguments.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <thread>

#include "chaos_checker.hpp"
#include "chaos_faults.hpp"
#include "chaos_stack.hpp"
#include "chaos_stripe_report.hpp"
#include "chaos_topology_report.hpp"
#include "chaos_workload.hpp"

namespace {

using namespace charge_outbox::chaos;
using Clock = std::chrono::steady_clock;

struct Options {
  std::uint64_t seed = 0;
  std::string product_build;  // another build's charge-api, relay, reconciler and migrator (--product-build)
  WorkloadOptions workload;
  FaultOptions faults;
  std::string clock_skew = "+7m";
  std::uint64_t deadline_s = 10;
  bool keep = false;
  std::string replication;  // empty: the single topology; sync, strict or async: HA
  AcquirerDialect acquirer = AcquirerDialect::kNative;
};

int Usage(const std::string& problem) {
  std::cerr << "chaos: " << problem
            << "\nusage: chaos [--short] [--seed N] [--charges N] [--clients N] [--no-kafka-restart] [--keep]"
               " [--product-build BUILD_DIR] [--clock-skew +7m|none] [--deadline SECONDS] [--spread SECONDS]"
               " [--ha] [--replication sync|strict|async] [--drill failover|broker-loss] [--ha-gap SECONDS]"
               " [--acquirer native|stripe]\n";
  return 2;
}

bool Parse(int argc, char** argv, Options& o) {
  o.seed = (std::uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
  o.workload.charges = 3000;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto number = [&](std::uint64_t& out) {
      if (i + 1 >= argc) return false;
      char* end = nullptr;
      out = std::strtoull(argv[++i], &end, 10);
      return end != nullptr && *end == '\0';
    };
    std::uint64_t n = 0;
    if (arg == "--short") {
      o.workload.charges = 5000;
      // Arrivals are paced (WorkloadOptions::spread); the clients only matter when the stack stalls, and
      // then enough of them must wait to fill charge-api's acquirer queue past its timeout.
      o.workload.clients = 32;
    } else if (arg == "--seed") {
      if (!number(o.seed)) return false;
    } else if (arg == "--charges") {
      if (!number(n) || n == 0) return false;
      o.workload.charges = static_cast<int>(n);
    } else if (arg == "--clients") {
      if (!number(n) || n == 0 || n > 512) return false;
      o.workload.clients = static_cast<int>(n);
    } else if (arg == "--no-kafka-restart") {
      o.faults.restart_kafka = false;
    } else if (arg == "--keep") {
      o.keep = true;
    } else if (arg == "--product-build") {
      if (i + 1 >= argc) return false;
      o.product_build = argv[++i];
    } else if (arg == "--ha") {
      if (o.replication.empty()) o.replication = "sync";
    } else if (arg == "--replication") {
      if (i + 1 >= argc) return false;
      o.replication = argv[++i];
      if (o.replication != "sync" && o.replication != "strict" && o.replication != "async") return false;
    } else if (arg == "--drill") {
      if (i + 1 >= argc) return false;
      const std::string drill = argv[++i];
      if (drill == "failover") {
        o.faults.drill = Drill::kFailover;
      } else if (drill == "broker-loss") {
        o.faults.drill = Drill::kBrokerLoss;
      } else {
        return false;
      }
    } else if (arg == "--acquirer") {
      if (i + 1 >= argc) return false;
      const std::string dialect = argv[++i];
      if (dialect == "native") {
        o.acquirer = AcquirerDialect::kNative;
      } else if (dialect == "stripe") {
        o.acquirer = AcquirerDialect::kStripe;
      } else {
        return false;
      }
    } else if (arg == "--ha-gap") {
      if (!number(n) || n == 0 || n > 600) return false;
      o.faults.ha_gap = std::chrono::seconds{n};
    } else if (arg == "--spread") {
      if (!number(n) || n == 0 || n > 86'400) return false;
      o.workload.spread = std::chrono::seconds{n};
    } else if (arg == "--deadline") {
      if (!number(o.deadline_s) || o.deadline_s < 6 || o.deadline_s > 86'400) return false;
    } else if (arg == "--clock-skew") {
      if (i + 1 >= argc) return false;
      o.clock_skew = argv[++i];
      if (o.clock_skew == "none") o.clock_skew.clear();
      if (!o.clock_skew.empty() && o.clock_skew.find_first_of("+-") != 0) return false;
    } else {
      return false;
    }
  }
  // A drill is a fault of the HA topology.
  return o.faults.drill == Drill::kNone || !o.replication.empty();
}

// The command that replays this run.
std::string Replay(const Options& o, std::uint64_t seed) {
  std::ostringstream s;
  s << "chaos --seed " << seed << " --charges " << o.workload.charges << " --clients " << o.workload.clients
    << " --spread " << o.workload.spread.count();
  if (!o.replication.empty()) s << " --replication " << o.replication;
  if (o.acquirer != AcquirerDialect::kNative) s << " --acquirer " << ToString(o.acquirer);
  if (o.faults.drill == Drill::kFailover) s << " --drill failover";
  if (o.faults.drill == Drill::kBrokerLoss) s << " --drill broker-loss";
  return s.str();
}

void PrintTable(const std::map<std::string, std::int64_t>& rows, const std::string& title) {
  std::cout << title << "\n";
  for (const auto& [name, n] : rows) std::cout << "  " << std::left << std::setw(64) << name << std::right << n << "\n";
}

std::map<std::string, std::int64_t> Outcomes(const std::vector<IntentOutcome>& outcomes) {
  std::map<std::string, std::int64_t> by;
  for (const auto& o : outcomes) {
    if (!o.used) continue;
    std::string label;
    if (o.walked_away) {
      label = "walked away at a " + (o.told.empty() ? std::string("refusal") : "refusal after " + o.told.back());
    } else if (o.gave_up) {
      label = "gave up, last told " + (o.told.empty() ? std::string("nothing") : o.told.back());
    } else if (o.final_status) {
      label = std::to_string(*o.final_status) + " " + o.final_charge_status;
    } else {
      label = "GET showed " + o.final_charge_status;
    }
    if (o.intent.payment_method == "pm_tok_declined") label += " (a declining card)";
    if (o.intent.key.ends_with("-again")) label += " (the order started over)";
    ++by[label];
  }
  return by;
}

// The daemons run from copies made at the start: a build in the same tree meanwhile (another engineer's)
// relinks them, and a daemon restarted while its file is being written cannot start.
void RunOwnCopies(Binaries& binaries, const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  for (std::string* binary : {&binaries.charge_api, &binaries.outbox_relay, &binaries.reconciler,
                              &binaries.acquirer_sim, &binaries.charge_migrate}) {
    const auto copy = dir / std::filesystem::path(*binary).filename();
    std::filesystem::copy_file(*binary, copy);
    *binary = copy.string();
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (!Parse(argc, argv, options)) return Usage("bad arguments");
  const auto seed = options.seed;
  std::cout << "chaos seed=" << seed << " charges=" << options.workload.charges
            << " clients=" << options.workload.clients << " clock-skew="
            << (options.clock_skew.empty() ? "none" : options.clock_skew) << " deadline=" << options.deadline_s
            << "s topology=" << (options.replication.empty() ? "single" : "ha, " + options.replication + " replication")
            << " acquirer=" << ToString(options.acquirer) << "   (replay: " << Replay(options, seed) << ")" << std::endl;

  char pattern[] = "/tmp/charge-outbox-chaos.XXXXXX";
  if (::mkdtemp(pattern) == nullptr) return Usage("cannot create a state directory");
  const std::filesystem::path state = pattern;
  const auto started = Clock::now();
  bool settled = false;
  Verdict verdict;
  std::map<std::string, std::int64_t> injected, answers;
  std::vector<IntentOutcome> outcomes;
  std::vector<Attempt> attempts;
  std::vector<FailoverRecord> failovers;
  std::vector<BrokerLossRecord> broker_losses;
  std::vector<LagSample> lag;
  std::string stop_failure;
  std::map<std::string, std::int64_t> stripe_exercise;
  StripeSettings stripe_settings;
  try {
    Binaries binaries{PROJECT_ROOT, CHARGE_API_BIN, OUTBOX_RELAY_BIN, RECONCILER_BIN, ACQUIRER_SIM_BIN,
                      CHARGE_MIGRATE_BIN};
    if (!options.product_build.empty()) {
      // The product from another build (a release to check, a deliberately broken one); acquirer-sim, the
      // test's own fixture, stays this build's.
      const auto in = [&](const std::string& name) { return options.product_build + "/services/" + name + "/" + name; };
      binaries.charge_api = in("charge-api");
      binaries.outbox_relay = in("outbox-relay");
      binaries.reconciler = in("reconciler");
      binaries.charge_migrate = in("charge-migrate");
      std::cout << "product binaries from " << options.product_build << std::endl;
    }
    RunOwnCopies(binaries, state / "bin");
    ChaosStack stack(binaries, state, std::cout);
    if (!options.clock_skew.empty()) stack.SkewChargeApiClock(options.clock_skew);
    stack.SetDeadline(std::chrono::seconds{options.deadline_s});
    stack.UseAcquirerDialect(options.acquirer);
    stripe_settings = stack.stripe();
    if (options.acquirer == AcquirerDialect::kStripe) {
      std::cout << "acquirer dialect stripe: " << DescribeStripeSettings(stack.stripe()) << std::endl;
    }
    if (!options.replication.empty()) stack.UseHighAvailability(options.replication);
    stack.Start();
    std::cout << "stack up after " << std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - started).count()
              << " s (state: " << state << ")" << std::endl;

    Workload workload(stack, options.workload, seed);
    FaultSchedule faults(stack, options.faults, seed, std::cout);
    std::atomic<bool> running{true};
    std::thread progress([&] {
      while (running) {
        for (int i = 0; i < 50 && running; ++i) std::this_thread::sleep_for(std::chrono::milliseconds{100});
        if (running) std::cout << "  " << workload.done() << "/" << options.workload.charges << " intents done" << std::endl;
      }
    });
    OutboxLagSampler sampler(stack.database_url());
    if (stack.high_availability()) sampler.Start();
    const auto load_started = Clock::now();
    const auto load_started_wall = std::chrono::system_clock::now();
    faults.Start();
    workload.Run();
    faults.Stop();
    running = false;
    progress.join();
    const auto load_seconds = std::chrono::duration<double>(Clock::now() - load_started).count();
    std::cout << "workload done in " << std::fixed << std::setprecision(1) << load_seconds << " s ("
              << static_cast<double>(options.workload.charges) / load_seconds << " intents/s); faults stopped, settling"
              << std::endl;
    injected = faults.injected();
    answers = workload.answers();
    outcomes = workload.outcomes();
    attempts = workload.attempts();
    failovers = faults.failovers();
    broker_losses = faults.broker_losses();
    PrintTable(Outcomes(outcomes), "intents, by what the client was finally told");
    PrintTable(answers, "answers over every attempt");
    settled = Settle(stack, std::chrono::seconds{240}, std::cout);
    sampler.Stop();
    lag = sampler.samples();
    CheckOptions check;
    check.forgetting_allowed = options.replication == "async";
    for (const auto& f : failovers) {
      check.forgetting_windows.emplace_back(f.lagging_from - std::chrono::seconds{1}, f.killed + std::chrono::seconds{1});
    }
    if (stack.high_availability() && settled) {
      // The window report over the whole load, as an operator runs it after a failover: it must record
      // every capture whose charge a failover forgot (invariant 14). Its window settles first.
      std::this_thread::sleep_for(std::chrono::seconds{5});
      const auto to = std::chrono::system_clock::now() - std::chrono::seconds{4};
      const int status = stack.RunWindowReport(load_started_wall - std::chrono::minutes{1}, to);
      std::cout << "window report over the whole load: exit status " << status << std::endl;
      check.window_report_ran = true;
      settled = Settle(stack, std::chrono::seconds{120}, std::cout);  // the events of what it flagged
    }
    stack.StopReconcilerTimer();
    verdict = Check(stack, outcomes, check, std::cout);
    if (options.acquirer == AcquirerDialect::kStripe) stripe_exercise = StripeExercise(stack, attempts);
    try {
      stack.Stop();
    } catch (const std::exception& e) {
      // The verdict stands and is printed; something the stack started did not stop cleanly.
      stop_failure = e.what();
    }
  } catch (const std::exception& e) {
    std::cout << "chaos: the run itself failed: " << e.what() << "\nstate kept in " << state << std::endl;
    std::error_code ignored;
    std::filesystem::remove_all(state / "bin", ignored);
    return 1;
  }

  std::int64_t total_faults = 0;
  for (const auto& [k, n] : injected) total_faults += n;
  std::cout << "\n==== chaos seed=" << seed << " acquirer=" << ToString(options.acquirer) << ": "
            << options.workload.charges << " intents, " << total_faults
            << " faults, " << std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - started).count()
            << " s in all\n";
  PrintTable(injected, "faults injected, by kind");
  PrintTable(Outcomes(outcomes), "intents, by what the client was finally told");
  PrintTable(answers, "answers over every attempt");
  PrintTable(verdict.charges_by_status, "charges, by final status");
  if (!options.replication.empty()) {
    PrintFailovers(failovers, attempts, lag, std::cout);
    PrintBrokerLosses(broker_losses, lag, verdict.redeliveries, std::cout);
    PrintTable(verdict.forgotten, "what the database forgot (" + options.replication + " replication)");
  }
  if (options.acquirer == AcquirerDialect::kStripe) {
    PrintTable(stripe_exercise, "the Stripe dialect (" + DescribeStripeSettings(stripe_settings) + ")");
  }
  std::cout << "invariants\n";
  for (const auto& inv : verdict.invariants) {
    std::cout << "  " << std::left << std::setw(100) << inv.name << std::right << std::setw(8) << inv.checked
              << " checked " << std::setw(6) << inv.violations << " violations";
    if (inv.forgotten > 0) std::cout << " (" << inv.forgotten << " more explained by forgotten commits)";
    std::cout << "\n";
    for (const auto& example : inv.examples) std::cout << "      e.g. " << example << "\n";
  }
  if (!stop_failure.empty()) std::cout << "stopping the stack failed: " << stop_failure << "\n";
  const bool ok = settled && verdict.ok() && stop_failure.empty();
  if (ok) {
    std::cout << "verdict: PASS. Every capture at the acquirer is recorded once, every client was told the truth, "
                 "and every event reached Kafka in order.\n";
  } else {
    std::cout << "verdict: FAIL" << (settled ? "" : " (the system did not settle: charges left pending or events "
                                                      "unpublished)")
              << ". Replay with: " << Replay(options, seed) << "; logs kept in " << state << "/logs\n";
  }
  std::filesystem::remove_all(state / "bin");  // the logs are what a failed run keeps
  if (ok && !options.keep) std::filesystem::remove_all(state);
  return ok ? 0 : 1;
}
