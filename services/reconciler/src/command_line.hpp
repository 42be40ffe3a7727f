// The reconciler's command line:
//
//   reconciler [--config PATH] [sweep]
//   reconciler [--config PATH] window --from T --to T [--output FILE]
//
// T is RFC 3339 ("2026-11-30T02:00:00Z", "2026-11-29T23:00:00-03:00"). Errors are config::ConfigError
// with key "argv", so main reports them like any configuration problem (exit 2).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace charge_outbox::reconciler {

inline constexpr const char* kUsage =
    "usage: reconciler [--config PATH] [sweep]\n"
    "       reconciler [--config PATH] window --from RFC3339 --to RFC3339 [--output FILE]";

struct CommandLine {
  enum class Command { kSweep, kWindow };
  Command command = Command::kSweep;
  std::string config_path;  // empty: no file, environment and defaults only
  std::chrono::system_clock::time_point from{};
  std::chrono::system_clock::time_point to{};
  std::string output;  // empty: the report goes to stdout (and log lines to stderr)
};

CommandLine ParseCommandLine(const std::vector<std::string>& args);

// RFC 3339 date-time: "YYYY-MM-DDTHH:MM:SS[.fraction](Z|+HH:MM|-HH:MM)", fractions kept to the microsecond.
std::optional<std::chrono::system_clock::time_point> ParseRfc3339(std::string_view text);

}  // namespace charge_outbox::reconciler
