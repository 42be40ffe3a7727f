// The clients: concurrent threads that behave like real payment clients. One idempotency key per intent,
// the same key and body on every retry; a timeout, a dropped connection, 409 (its Retry-After honoured),
// 429 and 5xx are retried with retry::Backoff (full jitter), each attempt on a charge-api instance picked at random
// (a load balancer); a 202 is either polled with GET or retried; until a final answer (201, 402) or the
// give-up time. Every answer is recorded, so the checker can hold each one against the acquirer's ledger,
// with what its words claim.
//
// Two kinds of client beyond the patient one: one that starts its order over under a new key after an
// answer the contract calls definitive for the key, and only then (a 402, or a GET showing `failed` or
// `canceled`); and one that walks away at its first 503 or 429, never to come back, as an impatient
// customer does.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "chaos_stack.hpp"

namespace charge_outbox::chaos {

struct Intent {
  std::string merchant_id;
  std::string api_key;
  std::string key;  // Idempotency-Key
  std::int64_t amount = 0;
  std::string payment_method;  // pm_tok_declined for the share that declines
  std::string order_id;        // the business order: a checkout started over keeps it, under a new key
};

// What one client learned about its intent.
struct IntentOutcome {
  Intent intent;
  bool used = true;  // a slot kept for a checkout started over, that no client needed, stays unused
  std::optional<int> final_status;    // 201 or 402, if a final answer came
  std::string final_charge_status;    // the body's status (or the GET that ended it)
  std::string charge_id;              // ch_..., once any answer named it
  std::vector<std::string> told;      // every charge state the client was told, in order ("captured", ...)
  std::vector<std::chrono::steady_clock::time_point> told_at;  // when each of `told` arrived
  // What the answers' words claimed about the key's charge, in order: "no_money" (a text saying no money
  // was taken, or nothing was charged), "under_review" (a 202 with the charge in needs_review).
  std::vector<std::string> claims;
  // Every answer was a refusal to try (503, 429, a connection refused): nothing this client asked for can
  // be in flight, so its charge must never be captured without it.
  bool only_told_to_retry = true;
  int attempts = 0;
  bool gave_up = false;
  bool walked_away = false;  // left at its first 503 or 429
  bool started_over = false;  // its order was started again under a new key (the slot after all intents)
};

// One POST as its client saw it: when it was sent and answered, and the answer ("201", "503 database-
// unavailable", "timeout", ...). The HA report holds them against the failovers' moments.
struct Attempt {
  std::chrono::steady_clock::time_point sent, answered;
  std::string answer;
  // When the same key's first POST was sent: a retry long after it replays a key the acquirer may have
  // forgotten (Stripe's key retention).
  std::chrono::steady_clock::time_point key_first_sent;
};

struct WorkloadOptions {
  int clients = 16;
  int charges = 3000;
  double decline_share = 0.1;
  double restart_share = 0.5;     // of definitive "no money" answers, how many clients start the order over
  double walk_away_share = 0.3;   // of clients, how many leave at their first 503 or 429
  std::chrono::seconds give_up{60};
  std::chrono::milliseconds request_timeout{5000};
  // The intents' arrivals spread evenly over at least this long: a short run lasts until the fault
  // schedule's first pass has met every family under load, however fast the stack answers.
  std::chrono::seconds spread{45};
};

class Workload {
 public:
  Workload(ChaosStack& stack, WorkloadOptions options, std::uint64_t seed);

  // Runs every intent to its end; returns when all clients are done.
  void Run();
  // How many intents have ended so far (for progress lines).
  int done() const { return done_; }
  // One per intent, then one per intent for the checkout a client may start over (unused if none did).
  const std::vector<IntentOutcome>& outcomes() const { return outcomes_; }
  // Answers by kind, over every attempt ("201", "409", "timeout", "refused", ...).
  std::map<std::string, std::int64_t> answers() const;
  // Every POST, in no particular order.
  std::vector<Attempt> attempts() const;

 private:
  void Client(int client_index);
  void Drive(IntentOutcome& outcome, std::uint64_t seed, bool walks_away);

  ChaosStack& stack_;
  WorkloadOptions options_;
  std::uint64_t seed_;
  std::vector<IntentOutcome> outcomes_;
  std::atomic<int> next_{0};
  std::chrono::steady_clock::time_point started_;
  std::atomic<int> done_{0};
  mutable std::mutex answers_mutex_;
  std::map<std::string, std::int64_t> answers_;
  std::vector<Attempt> attempts_;  // under answers_mutex_
};

}  // namespace charge_outbox::chaos
