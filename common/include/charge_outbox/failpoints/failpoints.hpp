// Failpoints: named places where a test makes a process die, fail or stall, to prove that nothing is
// lost or done twice when it happens in production.
//
// Set by the FAILPOINTS environment variable, read once at start-up:
//   FAILPOINTS="charge.after_acquirer_response=crash;relay.after_publish_before_mark=sleep(200)"
// Actions: `crash` (SIGKILL itself: no destructors, no flush, exactly like the OOM killer),
// `error` (the code at the point takes its failure path), `sleep(ms)` (stall).
// A build with CHARGE_OUTBOX_FAILPOINTS=OFF (a release build, the container image) compiles every point to
// nothing and refuses a non-empty FAILPOINTS at start-up (a config error, exit 2).
#pragma once

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace charge_outbox::failpoints {

// Every failpoint of the product (docs/failpoints.md); FAILPOINTS naming
// another is a config error, so a typo in a crash test cannot pass silently by never firing.
inline const std::vector<std::string> kKnownPoints = {
    "charge.before_intent_commit",     "charge.after_intent_commit",        "charge.after_acquirer_response",
    "relay.after_publish_before_mark", "relay.producer_fatal_error",        "reconciler.after_acquirer_lookup",
    "reconciler.before_transition",    "reconciler.after_void",             "inbox.after_commit_before_offset_commit",
};

enum class Action { kNone, kCrash, kError, kSleep };

struct Spec {
  Action action = Action::kNone;
  std::chrono::milliseconds sleep{0};
};

// Parses the FAILPOINTS syntax; throws config::ConfigError (key "FAILPOINTS") on a bad entry.
std::map<std::string, Spec> Parse(std::string_view text);

// Installs the process-wide set from `text` (usually getenv("FAILPOINTS")). Call once at start-up,
// before threads start; afterwards reading is lock-free.
void Configure(std::string_view text);
void ConfigureFromEnvironment();

// What the point `name` is set to do; kNone if unset (and always in a build without failpoints).
Spec Lookup(std::string_view name);

// For synchronous code: crashes or sleeps here as configured; returns true when the caller must take
// its failure path (`error`).
bool Hit(std::string_view name);

// For coroutines on an I/O thread: the same, but `sleep` waits on a timer of the awaiting coroutine's
// executor instead of blocking the thread, and a crash flushes the log first so the line that explains
// it is not lost with the process.
boost::asio::awaitable<bool> HitAsync(std::string_view name);

}  // namespace charge_outbox::failpoints
