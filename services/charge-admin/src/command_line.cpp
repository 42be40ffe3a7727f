#include "command_line.hpp"

#include <cctype>
#include <string_view>
#include <utility>

#include "charge_outbox/config/config.hpp"
#include "charge_outbox/util/operator_text.hpp"

namespace charge_outbox::charge_admin {
namespace {

// Bounds on what a person types, so that nothing unbounded reaches the audit table or a log line.
constexpr std::size_t kMaxName = util::kMaxOperatorName;
constexpr std::size_t kMaxReason = util::kMaxOperatorReason;
constexpr std::size_t kMaxKey = 255;
constexpr std::size_t kMaxOrder = 255;

[[noreturn]] void Usage(const std::string& problem) { throw config::ConfigError("argv", problem + "\n" + kUsage); }

bool IsUuid(const std::string& s) {
  if (s.size() != 36) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? s[i] != '-' : !std::isxdigit(static_cast<unsigned char>(s[i]))) return false;
  }
  return true;
}

std::string ChargeUuid(const std::string& text) {
  if (IsUuid(text)) return text;
  if (auto uuid = charges::UuidFromPublicId(text)) return *uuid;
  Usage("'" + text.substr(0, 80) + "' is not a charge id (ch_ and 32 hex digits, or a uuid)");
}

std::string OrderId(const std::string& value) {
  if (value.empty() || value.size() > kMaxOrder) Usage("--order needs an order id (1 to 255 bytes)");
  return value;
}

// A name or a reason a person typed, as the audit trail takes it.
std::string Text(const std::string& flag, const std::string& value, std::size_t max) {
  if (const auto problem = util::OperatorTextProblem(value, max)) Usage(flag + " " + *problem);
  return value;
}

// Walks the words after the command: `take(flag, value)` handles each, `value()` reading the flag's value.
template <class Take>
void ForEachArgument(const std::vector<std::string>& args, Take take) {
  for (std::size_t i = 2; i < args.size(); ++i) {
    const auto& arg = args[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) Usage(arg + " needs a value");
      return args[++i];
    };
    take(arg, value);
  }
}

// The flags that mean the same in every command. Whether `arg` was one.
template <class Value>
bool SharedFlag(const std::string& arg, const Value& value, CommandLine& cl) {
  if (arg == "--json") {
    cl.json = true;
  } else if (arg == "--merchant") {
    cl.merchant_id = value();
    if (!IsUuid(*cl.merchant_id)) Usage("--merchant needs a merchant's uuid (merchant list shows them)");
  } else {
    return false;
  }
  return true;
}

// A key's overlap after a rotation is at most this long: a key that should live longer was not rotated.
constexpr std::chrono::hours kMaxOverlap{24 * 30};
constexpr std::chrono::hours kDefaultOverlap{24};

CommandLine ParseMerchantCommand(CommandLine cl, const std::vector<std::string>& args) {
  using Command = CommandLine::Command;
  std::optional<std::string> overlap;
  bool by_seen = false, reason_seen = false, name_seen = false, prefix_seen = false;
  ForEachArgument(args, [&](const std::string& arg, const auto& value) {
    if (SharedFlag(arg, value, cl)) return;
    if (arg == "--name") {
      cl.name = Text("--name", value(), 200);
      name_seen = true;
    } else if (arg == "--prefix") {
      cl.prefix = value();
      if (cl.prefix.empty() || cl.prefix.size() > 64) Usage("--prefix needs a key's prefix, as key list shows it");
      prefix_seen = true;
    } else if (arg == "--overlap") {
      overlap = value();
    } else if (arg == "--reason") {
      cl.reason = Text("--reason", value(), kMaxReason);
      reason_seen = true;
    } else if (arg == "--by") {
      cl.by = Text("--by", value(), kMaxName);
      by_seen = true;
    } else {
      Usage("unexpected argument '" + arg.substr(0, 80) + "'");
    }
  });
  const bool lists = cl.command == Command::kMerchantList || cl.command == Command::kKeyList;
  const bool about_merchant = cl.command != Command::kMerchantAdd && cl.command != Command::kMerchantList;
  const bool about_key = cl.command == Command::kKeyRotate || cl.command == Command::kKeyRevoke;
  if (about_merchant && !cl.merchant_id) Usage("this command needs --merchant UUID (merchant list shows them)");
  if (!about_merchant && cl.merchant_id) Usage("--merchant does not belong to this command");
  if (about_key && !prefix_seen) Usage("this command needs --prefix PREFIX: the key, as key list shows it");
  if (!about_key && prefix_seen) Usage("--prefix belongs to key rotate and key revoke");
  if ((cl.command == Command::kMerchantAdd) != name_seen) {
    Usage(name_seen ? "--name belongs to merchant add" : "merchant add needs --name NAME");
  }
  if (overlap && cl.command != Command::kKeyRotate) Usage("--overlap belongs to key rotate");
  if (lists && (by_seen || reason_seen)) Usage("a list changes nothing: no --by or --reason");
  if (!lists && !by_seen) Usage("this command needs --by NAME: who made the change is on record");
  if (!lists && !reason_seen) Usage("this command needs --reason TEXT: why is on record");
  if (cl.command == Command::kKeyRevoke && cl.json) Usage("key revoke has no --json");
  if (cl.command == Command::kKeyRotate) {
    const auto parsed = overlap ? config::ParseDuration(*overlap) : std::optional(std::chrono::milliseconds{kDefaultOverlap});
    if (!parsed || *parsed > kMaxOverlap) {
      Usage("--overlap '" + overlap->substr(0, 40) + "' must be a duration of at most 720h (0s: the old key stops now)");
    }
    cl.overlap = *parsed;
  }
  return cl;
}

int ParseLimit(const std::string& limit) {
  int n = 0;
  try {
    std::size_t used = 0;
    n = std::stoi(limit, &used);
    if (used != limit.size()) throw std::invalid_argument("trailing");
  } catch (const std::exception&) {
    Usage("--limit needs a whole number");
  }
  if (n < 1 || n > 10'000) Usage("--limit must be between 1 and 10000");
  return n;
}

// An acquirer's capture id: it goes into the void's path, so letters, digits, '_' and '-' only.
bool IsCaptureId(const std::string& s) {
  if (s.empty() || s.size() > 100) return false;
  for (const char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  }
  return true;
}

CommandLine ParseOrphanCommand(CommandLine cl, const std::vector<std::string>& args) {
  using Command = CommandLine::Command;
  std::optional<std::string> limit;
  bool by_seen = false, reason_seen = false, capture_seen = false;
  ForEachArgument(args, [&](const std::string& arg, const auto& value) {
    if (SharedFlag(arg, value, cl)) return;
    if (arg == "--order") {
      cl.order_id = OrderId(value());
    } else if (arg == "--limit") {
      limit = value();
    } else if (arg == "--all") {
      cl.all = true;
    } else if (arg == "--reason") {
      cl.reason = Text("--reason", value(), kMaxReason);
      reason_seen = true;
    } else if (arg == "--by") {
      cl.by = Text("--by", value(), kMaxName);
      by_seen = true;
    } else if (!arg.empty() && arg[0] != '-' && !capture_seen) {
      if (!IsCaptureId(arg)) Usage("'" + arg.substr(0, 80) + "' is not an acquirer capture id (orphan list shows them)");
      cl.capture_id = arg;
      capture_seen = true;
    } else {
      Usage("unexpected argument '" + arg.substr(0, 80) + "'");
    }
  });
  const bool list = cl.command == Command::kOrphanList;
  const bool changes = cl.command == Command::kOrphanVoid || cl.command == Command::kOrphanAdopt;
  const bool adopt = cl.command == Command::kOrphanAdopt;
  if (list && capture_seen) Usage("orphan list takes no capture id: orphan show CAPTURE_ID shows one");
  if (!list && !capture_seen) Usage("this command needs the capture id, as orphan list shows it");
  if (!list && (cl.all || limit)) Usage("--all and --limit belong to orphan list");
  if (limit) cl.limit = ParseLimit(*limit);
  if (!changes && (by_seen || reason_seen)) Usage("a list or a show changes nothing: no --by or --reason");
  if (changes && !by_seen) Usage("this command needs --by NAME: who made the change is on record");
  if (changes && !reason_seen) Usage("this command needs --reason TEXT: why is on record");
  if (changes && cl.json) Usage("orphan void and orphan adopt have no --json");
  if (adopt && !cl.merchant_id) {
    Usage("orphan adopt needs --merchant UUID: the merchant whose money it is (the capture's key names it)");
  }
  if (adopt && !cl.order_id) Usage("orphan adopt needs --order ORDER_ID: the merchant's order the money paid for");
  if (!adopt && (cl.merchant_id || cl.order_id)) Usage("--merchant and --order belong to orphan adopt");
  return cl;
}

}  // namespace

CommandLine ParseCommandLine(const std::vector<std::string>& args) {
  if (args.size() < 2) Usage("a command is needed");
  CommandLine cl;
  const auto& noun = args[0];
  const auto& verb = args[1];
  using Command = CommandLine::Command;
  static const std::pair<std::pair<std::string_view, std::string_view>, Command> kMerchantCommands[] = {
      {{"merchant", "add"}, Command::kMerchantAdd}, {{"merchant", "list"}, Command::kMerchantList},
      {{"key", "issue"}, Command::kKeyIssue},       {{"key", "list"}, Command::kKeyList},
      {{"key", "rotate"}, Command::kKeyRotate},     {{"key", "revoke"}, Command::kKeyRevoke}};
  for (const auto& [words, command] : kMerchantCommands) {
    if (noun == words.first && verb == words.second) {
      cl.command = command;
      return ParseMerchantCommand(std::move(cl), args);
    }
  }
  static const std::pair<std::string_view, Command> kOrphanCommands[] = {{"list", Command::kOrphanList},
                                                                         {"show", Command::kOrphanShow},
                                                                         {"void", Command::kOrphanVoid},
                                                                         {"adopt", Command::kOrphanAdopt}};
  for (const auto& [word, command] : kOrphanCommands) {
    if (noun == "orphan" && verb == word) {
      cl.command = command;
      return ParseOrphanCommand(std::move(cl), args);
    }
  }
  if (noun == "review" && verb == "list") {
    cl.command = CommandLine::Command::kReviewList;
  } else if (noun == "review" && verb == "show") {
    cl.command = CommandLine::Command::kReviewShow;
  } else if (noun == "review" && verb == "resolve") {
    cl.command = CommandLine::Command::kReviewResolve;
  } else if (noun == "charge" && verb == "find") {
    cl.command = CommandLine::Command::kChargeFind;
  } else if (noun == "audit" && verb == "prune") {
    cl.command = CommandLine::Command::kAuditPrune;
  } else {
    Usage("unknown command '" + noun.substr(0, 40) + " " + verb.substr(0, 40) + "'");
  }
  std::optional<std::string> to, older_than, limit;
  bool by_seen = false, reason_seen = false;
  ForEachArgument(args, [&](const std::string& arg, const auto& value) {
    if (SharedFlag(arg, value, cl)) return;
    if (arg == "--key") {
      cl.key = value();
      if (cl.key->empty() || cl.key->size() > kMaxKey) Usage("--key needs an idempotency key (1 to 255 bytes)");
    } else if (arg == "--order") {
      cl.order_id = OrderId(value());
    } else if (arg == "--reason" && cl.command == CommandLine::Command::kReviewList) {
      cl.reason_filter = value();
      if (cl.reason_filter->empty() || cl.reason_filter->size() > 100) Usage("--reason needs a failure reason");
    } else if (arg == "--reason") {
      cl.reason = Text("--reason", value(), kMaxReason);
      reason_seen = true;
    } else if (arg == "--older-than") {
      older_than = value();
    } else if (arg == "--limit") {
      limit = value();
    } else if (arg == "--to") {
      to = value();
    } else if (arg == "--by") {
      cl.by = Text("--by", value(), kMaxName);
      by_seen = true;
    } else if (arg == "--against-acquirer") {
      cl.against_acquirer = Text("--against-acquirer", value(), kMaxReason);
    } else if (!arg.empty() && arg[0] != '-' && !cl.charge_id) {
      cl.charge_id = ChargeUuid(arg);
    } else {
      Usage("unexpected argument '" + arg.substr(0, 80) + "'");
    }
  });

  if (cl.command == Command::kAuditPrune) {
    if (cl.charge_id || cl.merchant_id || cl.key || cl.order_id || limit || to || by_seen || reason_seen ||
        cl.against_acquirer || cl.json) {
      Usage("audit prune takes --older-than only");
    }
    if (!older_than) Usage("audit prune needs --older-than (61320h: seven years)");
    cl.older_than = config::ParseDuration(*older_than);
    // A payment's audit trail outlives disputes and audits: a typo must not erase last month's.
    if (!cl.older_than || *cl.older_than < std::chrono::hours{24 * 365}) {
      Usage("--older-than '" + older_than->substr(0, 40) + "' must be a duration of at least a year (8760h)");
    }
    return cl;
  }
  const bool list = cl.command == Command::kReviewList;
  const bool resolve = cl.command == Command::kReviewResolve;
  if (!list && (older_than || limit || cl.reason_filter)) Usage("--older-than and --limit belong to review list and audit prune");
  if (!resolve && (to || by_seen || cl.against_acquirer || reason_seen)) {
    Usage("--to, --reason TEXT, --by and --against-acquirer belong to review resolve");
  }
  if (list) {
    if (cl.charge_id || cl.key || cl.order_id) Usage("review list takes filters, not a charge");
    if (older_than) {
      cl.older_than = config::ParseDuration(*older_than);
      if (!cl.older_than) Usage("--older-than '" + older_than->substr(0, 40) + "' is not a duration (30m, 24h)");
    }
    if (limit) cl.limit = ParseLimit(*limit);
    return cl;
  }
  // The other commands are about one charge (charge find: or an order's charges).
  const bool by_key = cl.merchant_id && cl.key;
  const bool by_order = cl.merchant_id && cl.order_id && cl.command == Command::kChargeFind;
  const int ways = (cl.charge_id ? 1 : 0) + (by_key ? 1 : 0) + (by_order ? 1 : 0);
  if (ways != 1 || (cl.merchant_id && !by_key && !by_order) || (!cl.merchant_id && (cl.key || cl.order_id))) {
    Usage(cl.command == Command::kChargeFind
              ? "charge find needs a charge id, or --merchant with --key or --order"
              : "this command needs a charge id, or --merchant with --key");
  }
  if (resolve) {
    if (!cl.charge_id) Usage("review resolve needs the charge id (review show prints it)");
    if (!by_seen) Usage("review resolve needs --by NAME: who decides is on record");
    if (!reason_seen) Usage("review resolve needs --reason TEXT: why is on record");
    if (!to) Usage("review resolve needs --to captured|failed|canceled");
    const auto status = charges::ParseChargeStatus(*to);
    if (!status || (*status != charges::ChargeStatus::kCaptured && *status != charges::ChargeStatus::kFailed &&
                    *status != charges::ChargeStatus::kCanceled)) {
      Usage("--to must be captured, failed or canceled");
    }
    cl.to = *status;
  }
  return cl;
}

}  // namespace charge_outbox::charge_admin
