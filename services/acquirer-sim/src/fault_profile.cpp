#include "fault_profile.hpp"

#include <boost/json/array.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/string.hpp>
#include <cmath>
#include <limits>
#include <numbers>

namespace charge_outbox::acquirer_sim {
namespace {

namespace json = boost::json;
using Result = boost::system::result<FaultProfile, ProfileError>;

// Ten minutes: longer than any delay a test or demo wants, short enough to catch a unit mistake.
constexpr std::int64_t kMaxMillis = 600'000;
constexpr std::int64_t kMaxVoidWindowMillis = 86'400'000;  // a day: settlement is daily at the latest
constexpr std::int64_t kMaxRetryAfterSeconds = 3600;
// Standard normal quantile at 0.99: the lognormal's sigma is ln(p99 / median) / this.
constexpr double kZ99 = 2.3263478740408408;

constexpr const char* kDistributionNames[] = {"none", "fixed", "uniform", "lognormal"};
constexpr std::pair<const char*, Operation> kOperationNames[] = {
    {"capture", kOpCapture}, {"void", kOpVoid}, {"lookup", kOpLookup}, {"list", kOpList},
    {"replay", kOpReplay}};

const char* DistributionName(LatencyDistribution d) { return kDistributionNames[static_cast<int>(d)]; }

// 0 and 1 as integers: Boost.JSON writes every double in exponent form ("0E0"), which reads badly in
// GET /admin/faults; other rates stay doubles.
json::value RateJson(double rate) {
  if (rate == 0.0 || rate == 1.0) return static_cast<std::int64_t>(rate);
  return rate;
}

std::optional<double> AsNumber(const json::value& v) {
  if (v.is_double()) return v.get_double();
  if (v.is_int64()) return static_cast<double>(v.get_int64());
  if (v.is_uint64()) return static_cast<double>(v.get_uint64());
  return std::nullopt;
}

std::optional<std::int64_t> AsInteger(const json::value& v) {
  if (v.is_int64()) return v.get_int64();
  if (v.is_uint64() && v.get_uint64() <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    return static_cast<std::int64_t>(v.get_uint64());
  }
  return std::nullopt;
}

ProfileError Error(std::string field, std::string problem) { return {std::move(field), std::move(problem)}; }

std::optional<ProfileError> ReadRate(const json::value& v, const std::string& field, double& out) {
  const auto number = AsNumber(v);
  if (!number || !(*number >= 0.0 && *number <= 1.0)) return Error(field, "must be a number from 0 to 1");
  out = *number;
  return std::nullopt;
}

std::optional<ProfileError> ReadMillis(const json::value& v, const std::string& field, std::int64_t min,
                                       std::int64_t max, std::int64_t& out) {
  const auto integer = AsInteger(v);
  if (!integer || *integer < min || *integer > max) {
    return Error(field, "must be an integer from " + std::to_string(min) + " to " + std::to_string(max));
  }
  out = *integer;
  return std::nullopt;
}

std::optional<ProfileError> ReadName(const json::value& v, const std::string& field, std::string& out) {
  if (!v.is_string() || v.get_string().empty() || v.get_string().size() > 64) {
    return Error(field, "must be a non-empty string of at most 64 characters");
  }
  out = std::string(v.get_string());
  return std::nullopt;
}

std::optional<ProfileError> ReadLatency(const json::value& v, Latency& out) {
  if (!v.is_object()) return Error("latency", "must be an object with a \"distribution\" member");
  const auto& obj = v.get_object();
  const auto* distribution = obj.if_contains("distribution");
  if (distribution == nullptr || !distribution->is_string()) {
    return Error("latency.distribution", "required: one of none, fixed, uniform, lognormal");
  }
  out = Latency{};
  const auto& name = distribution->get_string();
  std::vector<std::pair<const char*, std::int64_t*>> allowed;
  if (name == "none") {
    out.distribution = LatencyDistribution::kNone;
  } else if (name == "fixed") {
    out.distribution = LatencyDistribution::kFixed;
    allowed = {{"ms", &out.ms}};
  } else if (name == "uniform") {
    out.distribution = LatencyDistribution::kUniform;
    allowed = {{"min_ms", &out.min_ms}, {"max_ms", &out.max_ms}};
  } else if (name == "lognormal") {
    out.distribution = LatencyDistribution::kLognormal;
    allowed = {{"median_ms", &out.median_ms}, {"p99_ms", &out.p99_ms}, {"max_ms", &out.max_ms}};
  } else {
    return Error("latency.distribution", "must be one of none, fixed, uniform, lognormal");
  }
  bool has_max = false;
  for (const auto& member : obj) {
    if (member.key() == "distribution") continue;
    const std::string field = "latency." + std::string(member.key());
    bool known = false;
    for (const auto& [key, target] : allowed) {
      if (member.key() != key) continue;
      known = true;
      if (auto e = ReadMillis(member.value(), field, 0, kMaxMillis, *target)) return e;
      if (std::string_view(key) == "max_ms") has_max = true;
    }
    if (!known) return Error(field, "not a parameter of the " + std::string(name) + " distribution");
  }
  switch (out.distribution) {
    case LatencyDistribution::kNone:
      break;
    case LatencyDistribution::kFixed:
      break;
    case LatencyDistribution::kUniform:
      if (out.min_ms > out.max_ms) return Error("latency.max_ms", "must be at least min_ms");
      break;
    case LatencyDistribution::kLognormal:
      if (out.median_ms <= 0) return Error("latency.median_ms", "required, greater than 0");
      if (out.p99_ms < out.median_ms) return Error("latency.p99_ms", "required, at least median_ms");
      if (!has_max) out.max_ms = std::min(kMaxMillis, out.p99_ms * 10);
      if (out.max_ms < out.p99_ms) return Error("latency.max_ms", "must be at least p99_ms");
      break;
  }
  return std::nullopt;
}

std::optional<ProfileError> ReadDeclineRules(const json::value& v,
                                             std::map<std::string, std::string, std::less<>>& out) {
  if (!v.is_object()) return Error("decline_rules", "must be an object mapping payment_method to decline_code");
  out.clear();
  for (const auto& member : v.get_object()) {
    std::string code;
    if (auto e = ReadName(member.value(), "decline_rules." + std::string(member.key()), code)) return e;
    out.emplace(std::string(member.key()), std::move(code));
  }
  return std::nullopt;
}

std::optional<ProfileError> ReadOperations(const json::value& v, unsigned& out) {
  if (!v.is_array()) return Error("apply_to", "must be an array of capture, void, lookup, list, replay");
  out = 0;
  for (const auto& item : v.get_array()) {
    bool known = false;
    for (const auto& [name, op] : kOperationNames) {
      if (item.is_string() && item.get_string() == name) {
        out |= op;
        known = true;
      }
    }
    if (!known) return Error("apply_to", "each item must be one of capture, void, lookup, list, replay");
  }
  return std::nullopt;
}

std::string_view Trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

// One config value as the JSON scalar it spells ("0.1" -> 0.1); std::nullopt if absent.
std::optional<json::value> ConfigScalar(config::ConfigReader& reader, const std::string& key) {
  const auto text = reader.String(key, "");
  if (text.empty()) return std::nullopt;
  boost::system::error_code ec;
  auto value = json::parse(text, ec);
  if (ec || !value.is_number()) throw config::ConfigError(key, "expected a number, got \"" + text + "\"");
  return value;
}

// The profile's plain numeric members by name: probabilities, and whole numbers from 0 to a bound.
struct RateMember {
  std::string_view name;
  double FaultProfile::*member;
};
constexpr RateMember kRateMembers[] = {{"timeout_rate", &FaultProfile::timeout_rate},
                                       {"drop_rate", &FaultProfile::drop_rate},
                                       {"error_rate", &FaultProfile::error_rate},
                                       {"throttle_rate", &FaultProfile::throttle_rate},
                                       {"decline_rate", &FaultProfile::decline_rate},
                                       {"server_error_rate", &FaultProfile::server_error_rate}};
struct WholeMember {
  std::string_view name;
  std::int64_t FaultProfile::*member;
  std::int64_t max;
};
constexpr WholeMember kWholeMembers[] = {{"visibility_delay_ms", &FaultProfile::visibility_delay_ms, kMaxMillis},
                                         {"search_lag_ms", &FaultProfile::search_lag_ms, kMaxMillis},
                                         {"void_window_ms", &FaultProfile::void_window_ms, kMaxVoidWindowMillis},
                                         {"timeout_delay_ms", &FaultProfile::timeout_delay_ms, kMaxMillis},
                                         {"retry_after_s", &FaultProfile::retry_after_s, kMaxRetryAfterSeconds}};

template <class Member, std::size_t N>
const Member* Find(const Member (&members)[N], std::string_view name) {
  for (const auto& m : members) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

}  // namespace

Result ParseFaultProfile(const json::value& json_value, std::uint64_t default_seed) {
  if (!json_value.is_object()) return Error("", "the fault profile must be a JSON object");
  FaultProfile p;
  p.seed = default_seed;
  for (const auto& member : json_value.get_object()) {
    const std::string key(member.key());
    const auto& v = member.value();
    std::optional<ProfileError> error;
    if (key == "seed") {
      if (v.is_uint64()) p.seed = v.get_uint64();
      else if (v.is_int64() && v.get_int64() >= 0) p.seed = static_cast<std::uint64_t>(v.get_int64());
      else error = Error(key, "must be a non-negative integer");
    } else if (key == "latency") {
      error = ReadLatency(v, p.latency);
    } else if (const auto* rate = Find(kRateMembers, key)) {
      error = ReadRate(v, key, p.*rate->member);
    } else if (key == "decline_code") {
      error = ReadName(v, key, p.decline_code);
    } else if (key == "decline_rules") {
      error = ReadDeclineRules(v, p.decline_rules);
    } else if (const auto* whole = Find(kWholeMembers, key)) {
      error = ReadMillis(v, key, 0, whole->max, p.*whole->member);
    } else if (key == "apply_to") {
      error = ReadOperations(v, p.apply_to);
    } else {
      error = Error(key, "unknown member; see GET /admin/faults for the known ones");
    }
    if (error) return *error;
  }
  return p;
}

Result ParseFaultProfileText(std::string_view json_text, std::uint64_t default_seed) {
  boost::system::error_code ec;
  json::parse_options options;
  options.max_depth = 8;
  const auto value = json::parse(json_text, ec, {}, options);
  if (ec) return Error("", "the body is not valid JSON: " + ec.message());
  return ParseFaultProfile(value, default_seed);
}

json::object FaultProfileToJson(const FaultProfile& p) {
  json::object latency;
  latency["distribution"] = DistributionName(p.latency.distribution);
  switch (p.latency.distribution) {
    case LatencyDistribution::kNone:
      break;
    case LatencyDistribution::kFixed:
      latency["ms"] = p.latency.ms;
      break;
    case LatencyDistribution::kUniform:
      latency["min_ms"] = p.latency.min_ms;
      latency["max_ms"] = p.latency.max_ms;
      break;
    case LatencyDistribution::kLognormal:
      latency["median_ms"] = p.latency.median_ms;
      latency["p99_ms"] = p.latency.p99_ms;
      latency["max_ms"] = p.latency.max_ms;
      break;
  }
  json::object rules;
  for (const auto& [pm, code] : p.decline_rules) rules[pm] = code;
  json::array apply_to;
  for (const auto& [name, op] : kOperationNames) {
    if ((p.apply_to & op) != 0) apply_to.emplace_back(name);
  }
  json::object out;
  out["seed"] = p.seed;
  out["latency"] = std::move(latency);
  out["timeout_rate"] = RateJson(p.timeout_rate);
  out["drop_rate"] = RateJson(p.drop_rate);
  out["error_rate"] = RateJson(p.error_rate);
  out["throttle_rate"] = RateJson(p.throttle_rate);
  out["decline_rate"] = RateJson(p.decline_rate);
  out["server_error_rate"] = RateJson(p.server_error_rate);
  out["decline_code"] = p.decline_code;
  out["decline_rules"] = std::move(rules);
  out["visibility_delay_ms"] = p.visibility_delay_ms;
  out["search_lag_ms"] = p.search_lag_ms;
  out["void_window_ms"] = p.void_window_ms;
  out["timeout_delay_ms"] = p.timeout_delay_ms;
  out["retry_after_s"] = p.retry_after_s;
  out["apply_to"] = std::move(apply_to);
  return out;
}

FaultProfile LoadFaultProfile(config::ConfigReader& reader) {
  json::object obj;
  for (const char* name : {"seed", "timeout_rate", "drop_rate", "error_rate", "throttle_rate", "decline_rate",
                           "server_error_rate", "visibility_delay_ms", "search_lag_ms", "void_window_ms",
                           "timeout_delay_ms", "retry_after_s"}) {
    if (auto v = ConfigScalar(reader, std::string("faults.") + name)) obj[name] = *v;
  }
  if (auto code = reader.String("faults.decline_code", ""); !code.empty()) obj["decline_code"] = code;
  json::object latency;
  if (auto d = reader.String("faults.latency.distribution", ""); !d.empty()) latency["distribution"] = d;
  for (const char* name : {"ms", "min_ms", "max_ms", "median_ms", "p99_ms"}) {
    if (auto v = ConfigScalar(reader, std::string("faults.latency.") + name)) latency[name] = *v;
  }
  if (!latency.empty()) obj["latency"] = std::move(latency);
  if (auto rules_text = reader.String("faults.decline_rules", ""); !rules_text.empty()) {
    json::object rules;
    std::string_view rest = rules_text;
    while (!rest.empty()) {
      const auto comma = rest.find(',');
      const auto item = Trim(rest.substr(0, comma));
      rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
      const auto eq = item.find('=');
      if (eq == std::string_view::npos || eq == 0 || eq + 1 == item.size()) {
        throw config::ConfigError("faults.decline_rules",
                                  "expected payment_method=decline_code pairs separated by commas, got \"" +
                                      rules_text + "\"");
      }
      rules[Trim(item.substr(0, eq))] = Trim(item.substr(eq + 1));
    }
    obj["decline_rules"] = std::move(rules);
  }
  if (auto ops = reader.String("faults.apply_to", ""); !ops.empty()) {
    json::array list;
    std::string_view rest = ops;
    while (!rest.empty()) {
      const auto comma = rest.find(',');
      list.emplace_back(Trim(rest.substr(0, comma)));
      rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    }
    obj["apply_to"] = std::move(list);
  }
  auto parsed = ParseFaultProfile(obj, 1);
  if (!parsed) throw config::ConfigError("faults." + parsed.error().field, parsed.error().problem);
  return *parsed;
}

Prng::Prng(std::uint64_t seed) {
  // splitmix64 expands the seed into the four state words, as the xoshiro authors recommend.
  for (auto& word : state_) {
    seed += 0x9e3779b97f4a7c15ULL;
    std::uint64_t z = seed;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    word = z ^ (z >> 31);
  }
}

std::uint64_t Prng::Next() {
  const auto rotl = [](std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); };
  const std::uint64_t result = rotl(state_[1] * 5, 7) * 9;
  const std::uint64_t t = state_[1] << 17;
  state_[2] ^= state_[0];
  state_[3] ^= state_[1];
  state_[1] ^= state_[2];
  state_[0] ^= state_[3];
  state_[2] ^= t;
  state_[3] = rotl(state_[3], 45);
  return result;
}

double Prng::Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

std::chrono::milliseconds SampleLatency(const Latency& latency, double u1, double u2) {
  switch (latency.distribution) {
    case LatencyDistribution::kNone:
      return std::chrono::milliseconds{0};
    case LatencyDistribution::kFixed:
      return std::chrono::milliseconds{latency.ms};
    case LatencyDistribution::kUniform: {
      const auto span = static_cast<double>(latency.max_ms - latency.min_ms + 1);
      const auto offset = static_cast<std::int64_t>(u1 * span);
      return std::chrono::milliseconds{std::min(latency.max_ms, latency.min_ms + offset)};
    }
    case LatencyDistribution::kLognormal: {
      const double mu = std::log(static_cast<double>(latency.median_ms));
      const double sigma = std::log(static_cast<double>(latency.p99_ms) / static_cast<double>(latency.median_ms)) / kZ99;
      // Box-Muller; 1 - u1 is in (0, 1], so the logarithm is finite.
      const double z = std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(2.0 * std::numbers::pi * u2);
      const double ms = std::exp(mu + sigma * z);
      const auto rounded = static_cast<std::int64_t>(std::llround(std::min(ms, static_cast<double>(latency.max_ms))));
      return std::chrono::milliseconds{rounded};
    }
  }
  return std::chrono::milliseconds{0};
}

FaultEngine::FaultEngine(FaultProfile initial) : initial_(initial), profile_(initial), prng_(initial.seed) {}

void FaultEngine::Set(FaultProfile profile) {
  std::lock_guard lock(mutex_);
  prng_ = Prng(profile.seed);
  profile_ = std::move(profile);
}

void FaultEngine::Reset() { Set(initial_); }

FaultProfile FaultEngine::Get() const {
  std::lock_guard lock(mutex_);
  return profile_;
}

FaultDecision FaultEngine::Draw(Operation operation, std::string_view payment_method) {
  FaultDecision d;
  std::lock_guard lock(mutex_);
  const auto& p = profile_;
  d.visibility_delay = std::chrono::milliseconds{p.visibility_delay_ms};
  d.search_lag = std::chrono::milliseconds{p.search_lag_ms};
  if (operation == kOpVoid) d.void_window = std::chrono::milliseconds{p.void_window_ms};
  d.timeout_delay = std::chrono::milliseconds{p.timeout_delay_ms};
  d.retry_after_s = p.retry_after_s;
  if (operation == kOpCapture && !p.decline_rules.empty()) {
    if (const auto rule = p.decline_rules.find(payment_method); rule != p.decline_rules.end()) {
      d.decline_code = rule->second;
    }
  }
  if ((p.apply_to & operation) == 0) return d;
  // Always nine draws, in this order, whatever the outcome: see the class comment.
  const double u_throttle = prng_.Uniform();
  const double u_error = prng_.Uniform();
  const double u_latency1 = prng_.Uniform();
  const double u_latency2 = prng_.Uniform();
  const double u_decline = prng_.Uniform();
  const double u_timeout = prng_.Uniform();
  const double u_drop = prng_.Uniform();
  const double u_server_error = prng_.Uniform();
  const double u_server_work = prng_.Uniform();
  d.throttle = u_throttle < p.throttle_rate;
  d.error = !d.throttle && u_error < p.error_rate;
  d.latency = SampleLatency(p.latency, u_latency1, u_latency2);
  if (operation == kOpCapture && !d.decline_code && u_decline < p.decline_rate) d.decline_code = p.decline_code;
  d.drop = u_drop < p.drop_rate;
  d.timeout = !d.drop && u_timeout < p.timeout_rate;
  d.server_error = !d.throttle && !d.error && u_server_error < p.server_error_rate;
  d.server_error_work = d.server_error && u_server_work < 0.5;
  return d;
}

}  // namespace charge_outbox::acquirer_sim
