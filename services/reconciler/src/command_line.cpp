#include "command_line.hpp"

#include "charge_outbox/config/config.hpp"
#include "charge_outbox/util/time.hpp"

namespace charge_outbox::reconciler {
namespace {

[[noreturn]] void Usage(const std::string& problem) {
  throw config::ConfigError("argv", problem + "\n" + kUsage);
}

}  // namespace

CommandLine ParseCommandLine(const std::vector<std::string>& args) {
  CommandLine cl;
  std::optional<std::string> from, to, last;
  bool command_seen = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const auto& arg = args[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) Usage(arg + " needs a value");
      return args[++i];
    };
    if (arg == "--from") {
      from = value();
    } else if (arg == "--to") {
      to = value();
    } else if (arg == "--last") {
      last = value();
    } else if (arg == "--output") {
      cl.output = value();
      if (cl.output.empty()) Usage("--output needs a file name");
    } else if (!command_seen && (arg == "sweep" || arg == "window")) {
      command_seen = true;
      cl.command = arg == "sweep" ? CommandLine::Command::kSweep : CommandLine::Command::kWindow;
    } else {
      Usage("unexpected argument '" + arg + "'");
    }
  }
  if (cl.command == CommandLine::Command::kSweep) {
    if (from || to || last || !cl.output.empty()) {
      Usage("--from, --to, --last and --output belong to the window command");
    }
    return cl;
  }
  if (last) {
    if (from || to) Usage("window takes --last or --from and --to, not both");
    cl.last = config::ParseDuration(*last);
    if (!cl.last || *cl.last < std::chrono::minutes{1} || *cl.last > std::chrono::hours{24 * 31}) {
      Usage("--last '" + *last + "' is not a duration between 1m and 744h (1h, 24h)");
    }
    return cl;
  }
  if (!from || !to) Usage("window needs --from and --to, or --last");
  const auto parsed_from = util::ParseRfc3339(*from);
  if (!parsed_from) Usage("--from '" + *from + "' is not an RFC 3339 date-time (2026-11-30T02:00:00Z)");
  const auto parsed_to = util::ParseRfc3339(*to);
  if (!parsed_to) Usage("--to '" + *to + "' is not an RFC 3339 date-time (2026-11-30T03:00:00Z)");
  if (*parsed_from >= *parsed_to) Usage("--from must be earlier than --to");
  cl.from = *parsed_from;
  cl.to = *parsed_to;
  return cl;
}

Window TrailingWindow(std::chrono::system_clock::time_point now, std::chrono::milliseconds length,
                      std::chrono::milliseconds settle) {
  using namespace std::chrono;
  const auto settled = time_point_cast<milliseconds>(now) - settle;
  const auto since_epoch = settled.time_since_epoch();
  // floor, not truncation: a settled time before the epoch (only in tests) still rounds down.
  auto whole = since_epoch / length;
  if (since_epoch % length < milliseconds{0}) --whole;
  const system_clock::time_point to{duration_cast<system_clock::duration>(length * whole)};
  return {to - length, to};
}

}  // namespace charge_outbox::reconciler
