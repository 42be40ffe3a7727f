// charge-admin's command line: which command, on what, decided by whom.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "charge_outbox/charges/charge.hpp"

namespace charge_outbox::charge_admin {

inline constexpr const char* kUsage =
    "usage: charge-admin [--config PATH] COMMAND\n"
    "  review list [--merchant UUID] [--reason REASON] [--older-than 1h] [--limit N] [--json]\n"
    "  review show CHARGE_ID | --merchant UUID --key IDEMPOTENCY_KEY  [--json]\n"
    "  review resolve CHARGE_ID --to captured|failed|canceled --reason TEXT --by NAME\n"
    "                 [--against-acquirer REASON]\n"
    "  charge find CHARGE_ID | --merchant UUID (--key IDEMPOTENCY_KEY | --order ORDER_ID)  [--json]\n"
    "  audit prune --older-than 61320h  (the audit trail's retention: seven years; at least 8760h)\n"
    "  merchant add --name NAME --reason TEXT --by NAME  [--json]\n"
    "  merchant list  [--json]\n"
    "  key issue --merchant UUID --reason TEXT --by NAME  [--json]   (the key is shown once)\n"
    "  key list --merchant UUID  [--json]\n"
    "  key rotate --merchant UUID --prefix PREFIX [--overlap 24h] --reason TEXT --by NAME  [--json]\n"
    "  key revoke --merchant UUID --prefix PREFIX --reason TEXT --by NAME\n"
    "  orphan list [--all] [--limit N] [--json]   (captures without a charge of ours, as the acquirer has them now)\n"
    "  orphan show CAPTURE_ID [--json]\n"
    "  orphan void CAPTURE_ID --reason TEXT --by NAME\n"
    "  orphan adopt CAPTURE_ID --merchant UUID --order ORDER_ID --reason TEXT --by NAME\n"
    "exit status: 0 done (or already so), 1 refused or failed (nothing changed), 2 bad arguments\n";

struct CommandLine {
  enum class Command {
    kReviewList, kReviewShow, kReviewResolve, kChargeFind, kAuditPrune,
    kMerchantAdd, kMerchantList, kKeyIssue, kKeyList, kKeyRotate, kKeyRevoke,
    kOrphanList, kOrphanShow, kOrphanVoid, kOrphanAdopt
  };
  Command command = Command::kReviewList;
  bool json = false;
  // What the command is about: a charge id (ch_... or its uuid), or a merchant's key or order.
  std::optional<std::string> charge_id;  // the uuid
  std::optional<std::string> merchant_id;
  std::optional<std::string> key;
  std::optional<std::string> order_id;
  // review list, audit prune
  std::optional<std::string> reason_filter;
  std::optional<std::chrono::milliseconds> older_than;
  int limit = 100;
  // review resolve
  charges::ChargeStatus to = charges::ChargeStatus::kFailed;
  std::string reason;
  std::string by;
  std::optional<std::string> against_acquirer;  // the reason for overriding the acquirer
  // merchant and key commands (by and reason above are theirs too)
  std::string name;                     // merchant add
  std::string prefix;                   // key rotate, key revoke: the key's prefix, as key list shows it
  std::chrono::milliseconds overlap{};  // key rotate: how long the old key keeps working
  // orphan commands (merchant_id, order_id, limit, by and reason above are theirs too)
  std::string capture_id;  // the acquirer's capture id, as orphan list shows it
  bool all = false;        // orphan list: the settled ones too
};


// Throws config::ConfigError (key "argv") naming what is wrong, with the usage.
CommandLine ParseCommandLine(const std::vector<std::string>& args);

}  // namespace charge_outbox::charge_admin
