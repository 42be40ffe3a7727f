// The reconciler's command line:
//
//   reconciler [--config PATH] [sweep]
//   reconciler [--config PATH] window --from T --to T [--output FILE]
//   reconciler [--config PATH] window --last DURATION [--output FILE]
//
// `--last` names a window relative to the run (TrailingWindow), so a CronJob, which has no shell to
// compute dates, can report the previous hour or day on every run. T is RFC 3339 ("2026-11-30T02:00:00Z", "2026-11-29T23:00:00-03:00"). Errors are config::ConfigError
// with key "argv", so the start-up path reports them like any configuration problem (exit 2). `--config PATH`
// is every daemon's (app::ParseCommandLine) and is taken out before this parser sees the rest.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace charge_outbox::reconciler {

inline constexpr const char* kUsage =
    "usage: reconciler [--config PATH] [sweep]\n"
    "       reconciler [--config PATH] window --from RFC3339 --to RFC3339 [--output FILE]\n"
    "       reconciler [--config PATH] window --last DURATION [--output FILE]   (1h, 24h, ...)";

struct CommandLine {
  enum class Command { kSweep, kWindow };
  Command command = Command::kSweep;
  std::chrono::system_clock::time_point from{};
  std::chrono::system_clock::time_point to{};
  std::optional<std::chrono::milliseconds> last;  // set: the window is TrailingWindow(now, *last, settle)
  std::string output;  // empty: the report goes to stdout (and log lines to stderr)
};

CommandLine ParseCommandLine(const std::vector<std::string>& args);

struct Window {
  std::chrono::system_clock::time_point from;
  std::chrono::system_clock::time_point to;
};

// The latest whole `length` (counted from the Unix epoch, so consecutive runs tile time with no gap and no
// overlap, whatever minute the schedule fires) that ended at least `settle` before `now`: by then every
// capture in it is visible in the acquirer's listing. 1h at 10:30 with a 5m settle: [09:00, 10:00).
Window TrailingWindow(std::chrono::system_clock::time_point now, std::chrono::milliseconds length,
                      std::chrono::milliseconds settle);

}  // namespace charge_outbox::reconciler
