#include "charge_outbox/failpoints/failpoints.hpp"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <thread>

#include "charge_outbox/config/config.hpp"
#include "charge_outbox/log/log.hpp"

namespace charge_outbox::failpoints {
namespace {

// Written once by Configure() before any reader thread exists; read-only afterwards.
std::map<std::string, Spec, std::less<>>& Active() {
  static std::map<std::string, Spec, std::less<>> active;
  return active;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

Spec ParseAction(const std::string& point, std::string_view action) {
  if (action == "crash") return {Action::kCrash, {}};
  if (action == "error") return {Action::kError, {}};
  constexpr std::string_view kSleep = "sleep(";
  if (action.starts_with(kSleep) && action.ends_with(")")) {
    const auto digits = action.substr(kSleep.size(), action.size() - kSleep.size() - 1);
    long long ms = 0;
    const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), ms);
    if (ec == std::errc{} && ptr == digits.data() + digits.size() && !digits.empty() && ms >= 0) {
      return {Action::kSleep, std::chrono::milliseconds{ms}};
    }
  }
  throw config::ConfigError("FAILPOINTS", point + ": unknown action \"" + std::string(action) +
                                              "\"; use crash, error or sleep(MS)");
}

}  // namespace

std::map<std::string, Spec> Parse(std::string_view text) {
  std::map<std::string, Spec> points;
  while (!text.empty()) {
    const auto end = text.find_first_of(";,");
    const auto entry = Trim(text.substr(0, end));
    text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
    if (entry.empty()) continue;
    const auto eq = entry.find('=');
    if (eq == std::string_view::npos) {
      throw config::ConfigError("FAILPOINTS", "\"" + std::string(entry) + "\" is not NAME=ACTION");
    }
    const std::string name(Trim(entry.substr(0, eq)));
    if (std::find(kKnownPoints.begin(), kKnownPoints.end(), name) == kKnownPoints.end()) {
      std::string known;
      for (const auto& k : kKnownPoints) known += (known.empty() ? "" : ", ") + k;
      throw config::ConfigError("FAILPOINTS", "unknown failpoint \"" + name + "\"; known: " + known);
    }
    points[name] = ParseAction(name, Trim(entry.substr(eq + 1)));
  }
  return points;
}

void Configure(std::string_view text) {
  auto& active = Active();
  active.clear();
  for (auto& [name, spec] : Parse(text)) active.emplace(name, spec);
}

void ConfigureFromEnvironment() {
  const char* text = std::getenv("FAILPOINTS");
#if !(defined(CHARGE_OUTBOX_FAILPOINTS) && CHARGE_OUTBOX_FAILPOINTS)
  // Ignoring it would let a crash test pass against a release build by never crashing.
  if (text != nullptr && *text != '\0') {
    throw config::ConfigError("FAILPOINTS", "is set, but this is a release build without failpoints "
                                            "(CHARGE_OUTBOX_FAILPOINTS=OFF, as in the container image)");
  }
#endif
  Configure(text == nullptr ? "" : text);
}

Spec Lookup([[maybe_unused]] std::string_view name) {
#if defined(CHARGE_OUTBOX_FAILPOINTS) && CHARGE_OUTBOX_FAILPOINTS
  const auto& active = Active();
  if (active.empty()) return {};
  if (const auto it = active.find(name); it != active.end()) return it->second;
#endif
  return {};
}

bool Hit(std::string_view name) {
  const auto spec = Lookup(name);
  switch (spec.action) {
    case Action::kNone: return false;
    case Action::kCrash: ::kill(::getpid(), SIGKILL); ::_exit(137);
    case Action::kError: return true;
    case Action::kSleep: std::this_thread::sleep_for(spec.sleep); return false;
  }
  return false;
}

boost::asio::awaitable<bool> HitAsync(std::string_view name) {
  const auto spec = Lookup(name);
  switch (spec.action) {
    case Action::kNone: co_return false;
    case Action::kCrash:
      spdlog::warn("failpoint {}: crashing", name);
      log::Flush();
      Hit(name);
      co_return true;
    case Action::kError: co_return true;
    case Action::kSleep: {
      boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor, spec.sleep);
      co_await timer.async_wait(boost::asio::use_awaitable);
      co_return false;
    }
  }
  co_return false;
}

}  // namespace charge_outbox::failpoints
