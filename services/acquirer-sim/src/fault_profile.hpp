// Fault profile: what the simulated acquirer does wrong, and the seeded generator that decides, request
// by request, which fault happens. The JSON format (PUT/GET /admin/faults) is documented in README.md.
#pragma once

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <boost/system/result.hpp>
#include <chrono>
#include <functional>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "charge_outbox/config/config.hpp"

namespace charge_outbox::acquirer_sim {

enum class LatencyDistribution { kNone, kFixed, kUniform, kLognormal };

struct Latency {
  LatencyDistribution distribution = LatencyDistribution::kNone;
  std::int64_t ms = 0;         // fixed
  std::int64_t min_ms = 0;     // uniform
  std::int64_t max_ms = 0;     // uniform: upper bound; lognormal: cap
  std::int64_t median_ms = 0;  // lognormal
  std::int64_t p99_ms = 0;     // lognormal

  bool operator==(const Latency&) const = default;
};

// The operations the random faults (latency and the *_rate fields) apply to; a bit set.
enum Operation : unsigned {
  kOpCapture = 1u << 0,
  kOpVoid = 1u << 1,
  kOpLookup = 1u << 2,  // GET /v1/captures?idempotency_key= and GET /v1/captures/{id}
  kOpList = 1u << 3,
  // A capture whose key already finished (captured or declined), answered from the store: a real
  // acquirer in trouble is slow, failing or silent for these too.
  kOpReplay = 1u << 4,
};

struct FaultProfile {
  std::uint64_t seed = 1;
  Latency latency;
  double timeout_rate = 0;
  double drop_rate = 0;
  double error_rate = 0;
  double throttle_rate = 0;
  double decline_rate = 0;
  // The endpoint started, did its work with probability 1/2, then failed: 500 (stored under a Stripe
  // key and replayed, as Stripe does; our dialect keeps the key's work if it was done).
  double server_error_rate = 0;
  std::string decline_code = "generic_decline";  // for random declines
  // Deterministic declines: payment_method -> decline_code, applied to every capture.
  std::map<std::string, std::string, std::less<>> decline_rules = {{"pm_tok_declined", "card_declined"},
                                                                   {"pm_tok_insufficient", "insufficient_funds"}};
  std::int64_t visibility_delay_ms = 0;
  // Stripe dialect: a PaymentIntent is found by search only this long after its creation (Stripe's
  // search index lags); retrieve and list see it at once.
  std::int64_t search_lag_ms = 0;
  // A capture older than this has settled and can no longer be voided (0: never). Deterministic, whatever
  // apply_to says: a real acquirer voids only before settlement; after it, money comes back by refund.
  std::int64_t void_window_ms = 0;
  std::int64_t timeout_delay_ms = 60'000;
  std::int64_t retry_after_s = 1;
  unsigned apply_to = kOpCapture;

  bool operator==(const FaultProfile&) const = default;
};

// Which member is wrong (a dotted path such as "latency.p99_ms") and why.
struct ProfileError {
  std::string field;
  std::string problem;
};

// A profile from its JSON form. Absent members take their defaults (the seed's default is
// `default_seed`, the configured one), so a PUT replaces the whole profile. Unknown members are errors.
boost::system::result<FaultProfile, ProfileError> ParseFaultProfile(const boost::json::value& json,
                                                                    std::uint64_t default_seed);
boost::system::result<FaultProfile, ProfileError> ParseFaultProfileText(std::string_view json_text,
                                                                        std::uint64_t default_seed);
boost::json::object FaultProfileToJson(const FaultProfile& profile);

// The start-up profile from the `faults.*` config keys (same names as the JSON members; decline_rules is
// "pm=code,pm=code" and apply_to "capture,void"). Throws config::ConfigError naming the key.
FaultProfile LoadFaultProfile(config::ConfigReader& reader);

// One request's fate. Decided before the request does anything, so that it is reproducible.
struct FaultDecision {
  bool throttle = false;  // answer 429 + Retry-After, change nothing
  bool error = false;     // answer 503 + Retry-After, change nothing
  bool timeout = false;   // do the work, answer after timeout_delay
  bool drop = false;      // do the work, close without answering
  bool server_error = false;       // answer 500 after (maybe) doing the work
  bool server_error_work = false;  // with server_error: whether the work is done first
  std::optional<std::string> decline_code;  // captures only
  std::chrono::milliseconds latency{0};
  std::chrono::milliseconds visibility_delay{0};
  std::chrono::milliseconds search_lag{0};
  std::chrono::milliseconds void_window{0};  // voids only; 0: no window
  std::chrono::milliseconds timeout_delay{0};
  std::int64_t retry_after_s = 0;
};

// xoshiro256**: small, fast, and the same sequence on every platform (std::normal_distribution and
// friends are not specified bit for bit, so they would break reproducibility across toolchains).
class Prng {
 public:
  explicit Prng(std::uint64_t seed);
  std::uint64_t Next();
  double Uniform();  // [0, 1)

 private:
  std::uint64_t state_[4];
};

// Thread-safe. Every request to an operation in apply_to consumes the same number of draws whatever its
// outcome, so a sequence of requests sees the same faults on every run with the same seed.
class FaultEngine {
 public:
  explicit FaultEngine(FaultProfile initial);

  // Replaces the profile and restarts the generator from its seed.
  void Set(FaultProfile profile);
  // Back to the start-up profile, generator restarted.
  void Reset();
  FaultProfile Get() const;

  // `payment_method` matters for captures only (decline rules).
  FaultDecision Draw(Operation operation, std::string_view payment_method = {});

 private:
  const FaultProfile initial_;
  mutable std::mutex mutex_;
  FaultProfile profile_;
  Prng prng_;
};

// Samples the latency distribution from two uniform draws in [0, 1).
std::chrono::milliseconds SampleLatency(const Latency& latency, double u1, double u2);

}  // namespace charge_outbox::acquirer_sim
