#include "command_line.hpp"

#include "charge_outbox/config/config.hpp"

namespace charge_outbox::reconciler {
namespace {

[[noreturn]] void Usage(const std::string& problem) {
  throw config::ConfigError("argv", problem + "\n" + kUsage);
}

std::optional<int> Digits(std::string_view text, std::size_t pos, std::size_t count) {
  if (pos + count > text.size()) return std::nullopt;
  int value = 0;
  for (std::size_t i = pos; i < pos + count; ++i) {
    if (text[i] < '0' || text[i] > '9') return std::nullopt;
    value = value * 10 + (text[i] - '0');
  }
  return value;
}

}  // namespace

std::optional<std::chrono::system_clock::time_point> ParseRfc3339(std::string_view t) {
  using namespace std::chrono;
  // 2026-11-30T02:00:00 is 19 characters, then an optional fraction, then the offset.
  if (t.size() < 20 || t[4] != '-' || t[7] != '-' || (t[10] != 'T' && t[10] != 't') || t[13] != ':' ||
      t[16] != ':') {
    return std::nullopt;
  }
  const auto year = Digits(t, 0, 4), month = Digits(t, 5, 2), day = Digits(t, 8, 2);
  const auto hour = Digits(t, 11, 2), minute = Digits(t, 14, 2), second = Digits(t, 17, 2);
  if (!year || !month || !day || !hour || !minute || !second || *hour > 23 || *minute > 59 || *second > 59) {
    return std::nullopt;
  }
  const year_month_day date{std::chrono::year{*year}, std::chrono::month{static_cast<unsigned>(*month)},
                            std::chrono::day{static_cast<unsigned>(*day)}};
  if (!date.ok()) return std::nullopt;
  std::size_t pos = 19;
  microseconds fraction{0};
  if (t[pos] == '.') {
    ++pos;
    std::int64_t scale = 100000;
    const auto start = pos;
    while (pos < t.size() && t[pos] >= '0' && t[pos] <= '9') {
      fraction += microseconds{(t[pos] - '0') * scale};
      scale /= 10;
      ++pos;
    }
    if (pos == start) return std::nullopt;
  }
  minutes offset{0};
  if (pos == t.size() - 1 && (t[pos] == 'Z' || t[pos] == 'z')) {
    // UTC
  } else if (pos + 6 == t.size() && (t[pos] == '+' || t[pos] == '-') && t[pos + 3] == ':') {
    const auto oh = Digits(t, pos + 1, 2), om = Digits(t, pos + 4, 2);
    if (!oh || !om || *oh > 23 || *om > 59) return std::nullopt;
    offset = hours{*oh} + minutes{*om};
    if (t[pos] == '-') offset = -offset;
  } else {
    return std::nullopt;
  }
  const auto local = sys_days{date} + hours{*hour} + minutes{*minute} + seconds{*second} + fraction;
  return time_point_cast<system_clock::duration>(local - offset);
}

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
    if (arg == "--config") {
      cl.config_path = value();
    } else if (arg == "--from") {
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
  const auto parsed_from = ParseRfc3339(*from);
  if (!parsed_from) Usage("--from '" + *from + "' is not an RFC 3339 date-time (2026-11-30T02:00:00Z)");
  const auto parsed_to = ParseRfc3339(*to);
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
