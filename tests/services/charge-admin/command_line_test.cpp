// charge-admin's command line: every command's shape, and the refusals that keep a decision from being
// taken without a name, a reason or a target.
#include "command_line.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "charge_outbox/config/config.hpp"

namespace charge_outbox::charge_admin {
namespace {

using ::testing::HasSubstr;

constexpr const char* kCharge = "ch_0123456789abcdef0123456789abcdef";
constexpr const char* kUuid = "01234567-89ab-cdef-0123-456789abcdef";
constexpr const char* kMerchant = "00000000-0000-4000-8000-00000000000a";

std::string Refusal(const std::vector<std::string>& args) {
  try {
    ParseCommandLine(args);
  } catch (const config::ConfigError& e) {
    EXPECT_EQ(e.key(), "argv");
    return e.problem();
  }
  ADD_FAILURE() << "accepted";
  return "";
}

TEST(ChargeAdminCommandLine, ReviewListTakesFilters) {
  const auto cl = ParseCommandLine({"review", "list", "--merchant", kMerchant, "--reason", "void_unconfirmed",
                                    "--older-than", "2h", "--limit", "20", "--json"});
  EXPECT_EQ(cl.command, CommandLine::Command::kReviewList);
  EXPECT_EQ(cl.merchant_id, kMerchant);
  EXPECT_EQ(cl.reason_filter, "void_unconfirmed");
  EXPECT_EQ(cl.older_than, std::chrono::hours{2});
  EXPECT_EQ(cl.limit, 20);
  EXPECT_TRUE(cl.json);
  EXPECT_EQ(ParseCommandLine({"review", "list"}).limit, 100);
  EXPECT_THAT(Refusal({"review", "list", "--limit", "0"}), HasSubstr("--limit"));
  EXPECT_THAT(Refusal({"review", "list", "--limit", "5x"}), HasSubstr("--limit"));
  EXPECT_THAT(Refusal({"review", "list", "--older-than", "2"}), HasSubstr("not a duration"));
  EXPECT_THAT(Refusal({"review", "list", kCharge}), HasSubstr("filters"));
}

TEST(ChargeAdminCommandLine, AChargeIsNamedByItsIdEitherFormOrByAMerchantsKey) {
  EXPECT_EQ(ParseCommandLine({"review", "show", kCharge}).charge_id, kUuid);
  EXPECT_EQ(ParseCommandLine({"review", "show", kUuid}).charge_id, kUuid);
  const auto by_key = ParseCommandLine({"review", "show", "--merchant", kMerchant, "--key", "order-7-try-1"});
  EXPECT_EQ(by_key.key, "order-7-try-1");
  EXPECT_EQ(ParseCommandLine({"charge", "find", "--merchant", kMerchant, "--order", "PED-7"}).order_id, "PED-7");
  EXPECT_THAT(Refusal({"review", "show"}), HasSubstr("needs a charge id"));
  EXPECT_THAT(Refusal({"review", "show", "ch_nothex"}), HasSubstr("not a charge id"));
  EXPECT_THAT(Refusal({"review", "show", "--key", "k"}), HasSubstr("--merchant"));
  EXPECT_THAT(Refusal({"review", "show", kCharge, "--merchant", kMerchant, "--key", "k"}), HasSubstr("needs"));
  EXPECT_THAT(Refusal({"review", "show", "--merchant", "acme", "--key", "k"}), HasSubstr("uuid"));
  EXPECT_THAT(Refusal({"review", "show", "--merchant", kMerchant, "--order", "PED-7"}), HasSubstr("needs"));
}

TEST(ChargeAdminCommandLine, ADecisionNeedsWhoWhyAndWhere) {
  const auto cl = ParseCommandLine({"review", "resolve", kCharge, "--to", "canceled", "--reason", "ticket OPS-12",
                                    "--by", "alice"});
  EXPECT_EQ(cl.command, CommandLine::Command::kReviewResolve);
  EXPECT_EQ(cl.to, charges::ChargeStatus::kCanceled);
  EXPECT_EQ(cl.reason, "ticket OPS-12");
  EXPECT_EQ(cl.by, "alice");
  EXPECT_FALSE(cl.against_acquirer);
  const auto overriding = ParseCommandLine({"review", "resolve", kCharge, "--to", "failed", "--reason", "r", "--by",
                                            "bob", "--against-acquirer", "the acquirer's lookup is broken, see INC-3"});
  EXPECT_EQ(overriding.against_acquirer, "the acquirer's lookup is broken, see INC-3");

  EXPECT_THAT(Refusal({"review", "resolve", kCharge, "--to", "failed", "--reason", "r"}), HasSubstr("--by"));
  EXPECT_THAT(Refusal({"review", "resolve", kCharge, "--to", "failed", "--by", "a"}), HasSubstr("--reason"));
  EXPECT_THAT(Refusal({"review", "resolve", kCharge, "--reason", "r", "--by", "a"}), HasSubstr("--to"));
  EXPECT_THAT(Refusal({"review", "resolve", "--to", "failed", "--reason", "r", "--by", "a"}), HasSubstr("charge id"));
  for (const char* to : {"pending", "needs_review", "refunded"}) {
    EXPECT_THAT(Refusal({"review", "resolve", kCharge, "--to", to, "--reason", "r", "--by", "a"}),
                HasSubstr("captured, failed or canceled"));
  }
  EXPECT_THAT(Refusal({"review", "resolve", kCharge, "--to", "failed", "--reason", "r", "--by", "   "}),
              HasSubstr("empty"));
  EXPECT_THAT(Refusal({"review", "resolve", kCharge, "--to", "failed", "--reason", "r\n", "--by", "a"}),
              HasSubstr("control"));
  EXPECT_THAT(Refusal({"review", "resolve", kCharge, "--to", "failed", "--reason", std::string(901, 'x'), "--by", "a"}),
              HasSubstr("longer than 900"));
  EXPECT_THAT(Refusal({"review", "resolve", kCharge, "--to", "failed", "--reason", "r", "--by", "a",
                       "--against-acquirer", std::string(901, 'x')}),
              HasSubstr("longer than 900"));
  // Both at their longest still fit the audit row's reason (2,000 bytes) with the words that join them.
  const auto longest = ParseCommandLine({"review", "resolve", kCharge, "--to", "failed", "--reason",
                                         std::string(900, 'x'), "--by", std::string(200, 'n'),
                                         "--against-acquirer", std::string(900, 'y')});
  EXPECT_EQ(longest.reason.size() + longest.against_acquirer->size(), 1800u);
  EXPECT_THAT(Refusal({"review", "show", kCharge, "--by", "a"}), HasSubstr("belong to review resolve"));
}

TEST(ChargeAdminCommandLine, TheAuditTrailIsPrunedOnlyOfRowsAYearOldOrMore) {
  const auto cl = ParseCommandLine({"audit", "prune", "--older-than", "61320h"});
  EXPECT_EQ(cl.command, CommandLine::Command::kAuditPrune);
  EXPECT_EQ(cl.older_than, std::chrono::hours{61320});
  EXPECT_THAT(Refusal({"audit", "prune"}), HasSubstr("needs --older-than"));
  EXPECT_THAT(Refusal({"audit", "prune", "--older-than", "720h"}), HasSubstr("at least a year"));
  EXPECT_THAT(Refusal({"audit", "prune", "--older-than", "61320h", kCharge}), HasSubstr("--older-than only"));
}

TEST(ChargeAdminCommandLine, MerchantsAndKeysAreChangedOnlyWithWhoAndWhy) {
  const auto add = ParseCommandLine({"merchant", "add", "--name", "Loja Um", "--reason", "ONB-1", "--by", "alice"});
  EXPECT_EQ(add.command, CommandLine::Command::kMerchantAdd);
  EXPECT_EQ(add.name, "Loja Um");
  EXPECT_EQ(add.by, "alice");
  EXPECT_THAT(Refusal({"merchant", "add", "--name", "Loja", "--reason", "r"}), HasSubstr("--by"));
  EXPECT_THAT(Refusal({"merchant", "add", "--reason", "r", "--by", "a"}), HasSubstr("needs --name"));
  EXPECT_EQ(ParseCommandLine({"merchant", "list", "--json"}).command, CommandLine::Command::kMerchantList);
  EXPECT_THAT(Refusal({"merchant", "list", "--by", "a"}), HasSubstr("a list changes nothing"));

  const auto issue = ParseCommandLine({"key", "issue", "--merchant", kMerchant, "--reason", "r", "--by", "a"});
  EXPECT_EQ(issue.command, CommandLine::Command::kKeyIssue);
  EXPECT_EQ(issue.merchant_id, kMerchant);
  EXPECT_THAT(Refusal({"key", "issue", "--reason", "r", "--by", "a"}), HasSubstr("needs --merchant"));
  EXPECT_THAT(Refusal({"key", "issue", "--merchant", "loja", "--reason", "r", "--by", "a"}), HasSubstr("uuid"));
  EXPECT_THAT(Refusal({"key", "issue", "--merchant", kMerchant, "--prefix", "sk_x", "--reason", "r", "--by", "a"}),
              HasSubstr("--prefix belongs"));

  const auto rotate = ParseCommandLine(
      {"key", "rotate", "--merchant", kMerchant, "--prefix", "sk_AAAAAAAAAAAAA", "--reason", "r", "--by", "a"});
  EXPECT_EQ(rotate.overlap, std::chrono::hours{24}) << "the default overlap";
  EXPECT_EQ(ParseCommandLine({"key", "rotate", "--merchant", kMerchant, "--prefix", "p", "--overlap", "0s",
                              "--reason", "r", "--by", "a"})
                .overlap,
            std::chrono::milliseconds{0});
  EXPECT_THAT(Refusal({"key", "rotate", "--merchant", kMerchant, "--prefix", "p", "--overlap", "721h", "--reason",
                       "r", "--by", "a"}),
              HasSubstr("at most 720h"));
  EXPECT_THAT(Refusal({"key", "rotate", "--merchant", kMerchant, "--reason", "r", "--by", "a"}),
              HasSubstr("needs --prefix"));
  EXPECT_THAT(Refusal({"key", "revoke", "--merchant", kMerchant, "--prefix", "p", "--by", "a"}),
              HasSubstr("--reason"));
  EXPECT_THAT(Refusal({"key", "revoke", "--merchant", kMerchant, "--prefix", "p", "--overlap", "1h", "--reason", "r",
                       "--by", "a"}),
              HasSubstr("--overlap belongs to key rotate"));
  EXPECT_THAT(Refusal({"key", "destroy", "--merchant", kMerchant}), HasSubstr("unknown command"));
}

// The orphan commands (captures without a charge of ours): a read names nobody; a void or an adoption
// needs who and why, and an adoption whose merchant and order the person states.
TEST(ChargeAdminCommandLine, OrphanCommandsNeedACaptureAndAChangeNeedsWhoAndWhy) {
  const auto list = ParseCommandLine({"orphan", "list", "--all", "--limit", "5", "--json"});
  EXPECT_EQ(list.command, CommandLine::Command::kOrphanList);
  EXPECT_TRUE(list.all);
  EXPECT_EQ(list.limit, 5);
  EXPECT_TRUE(list.json);
  EXPECT_FALSE(ParseCommandLine({"orphan", "list"}).all) << "the open ones by default";
  EXPECT_EQ(ParseCommandLine({"orphan", "show", "cap_0A-b_9"}).capture_id, "cap_0A-b_9");

  const auto v = ParseCommandLine({"orphan", "void", "cap_1", "--reason", "OPS-9: not ours", "--by", "alice"});
  EXPECT_EQ(v.command, CommandLine::Command::kOrphanVoid);
  EXPECT_EQ(v.capture_id, "cap_1");
  EXPECT_EQ(v.by, "alice");
  EXPECT_EQ(v.reason, "OPS-9: not ours");
  const auto a = ParseCommandLine({"orphan", "adopt", "cap_1", "--merchant", kMerchant, "--order", "PED-7",
                                   "--reason", "OPS-9: record lost in the failover", "--by", "alice"});
  EXPECT_EQ(a.command, CommandLine::Command::kOrphanAdopt);
  EXPECT_EQ(a.merchant_id, kMerchant);
  EXPECT_EQ(a.order_id, "PED-7");

  EXPECT_THAT(Refusal({"orphan", "show"}), HasSubstr("needs the capture id"));
  EXPECT_THAT(Refusal({"orphan", "void", "--reason", "r", "--by", "a"}), HasSubstr("needs the capture id"));
  EXPECT_THAT(Refusal({"orphan", "show", "cap/../x"}), HasSubstr("not an acquirer capture id"));
  EXPECT_THAT(Refusal({"orphan", "show", std::string(101, 'c')}), HasSubstr("not an acquirer capture id"));
  EXPECT_THAT(Refusal({"orphan", "list", "cap_1"}), HasSubstr("takes no capture id"));
  EXPECT_THAT(Refusal({"orphan", "show", "cap_1", "--limit", "3"}), HasSubstr("belong to orphan list"));
  EXPECT_THAT(Refusal({"orphan", "list", "--limit", "0"}), HasSubstr("--limit"));
  EXPECT_THAT(Refusal({"orphan", "show", "cap_1", "--by", "a"}), HasSubstr("changes nothing"));
  EXPECT_THAT(Refusal({"orphan", "void", "cap_1", "--reason", "r"}), HasSubstr("--by NAME"));
  EXPECT_THAT(Refusal({"orphan", "void", "cap_1", "--by", "a"}), HasSubstr("--reason TEXT"));
  EXPECT_THAT(Refusal({"orphan", "void", "cap_1", "--reason", "", "--by", "a"}), HasSubstr("--reason"));
  EXPECT_THAT(Refusal({"orphan", "void", "cap_1", "--reason", "r", "--by", "a", "--json"}), HasSubstr("no --json"));
  EXPECT_THAT(Refusal({"orphan", "void", "cap_1", "--reason", "r", "--by", "a", "--merchant", kMerchant}),
              HasSubstr("belong to orphan adopt"));
  EXPECT_THAT(Refusal({"orphan", "adopt", "cap_1", "--order", "PED-7", "--reason", "r", "--by", "a"}),
              HasSubstr("needs --merchant"));
  EXPECT_THAT(Refusal({"orphan", "adopt", "cap_1", "--merchant", kMerchant, "--reason", "r", "--by", "a"}),
              HasSubstr("needs --order"));
  EXPECT_THAT(Refusal({"orphan", "adopt", "cap_1", "--merchant", "acme", "--order", "P", "--reason", "r", "--by", "a"}),
              HasSubstr("uuid"));
  EXPECT_THAT(Refusal({"orphan", "adopt", "cap_1", "cap_2", "--merchant", kMerchant, "--order", "P", "--reason", "r",
                       "--by", "a"}),
              HasSubstr("unexpected argument"));
  EXPECT_THAT(Refusal({"orphan", "refund", "cap_1"}), HasSubstr("unknown command"));
}

TEST(ChargeAdminCommandLine, UnknownCommandsAndArgumentsAreRefused) {
  EXPECT_THAT(Refusal({}), HasSubstr("a command is needed"));
  EXPECT_THAT(Refusal({"review", "delete", kCharge}), HasSubstr("unknown command"));
  EXPECT_THAT(Refusal({"review", "show", kCharge, "--force"}), HasSubstr("unexpected argument"));
  EXPECT_THAT(Refusal({"review", "list", "--merchant"}), HasSubstr("needs a value"));
}

}  // namespace
}  // namespace charge_outbox::charge_admin
