#include "charge_request.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <utility>
#include <vector>

namespace charge_outbox::charge_api {
namespace {

FieldError ErrorOf(std::string_view body) {
  auto r = ParseChargeRequest(body);
  if (auto* e = std::get_if<FieldError>(&r)) return *e;
  ADD_FAILURE() << "accepted: " << body;
  return {};
}

TEST(ParseChargeRequest, AcceptsTheSpecExample) {
  auto r = ParseChargeRequest(
      R"({"amount": 25000, "currency": "BRL", "order_id": "PED-0001", "payment_method": "pm_tok_visa", "description": "..."})");
  ASSERT_TRUE(std::holds_alternative<ChargeRequest>(r));
  const auto& c = std::get<ChargeRequest>(r);
  EXPECT_EQ(c.amount, 25000);
  EXPECT_EQ(c.currency, "BRL");
  EXPECT_EQ(c.order_id, "PED-0001");
  EXPECT_EQ(c.payment_method, "pm_tok_visa");
  EXPECT_EQ(c.description, "...");
}

TEST(ParseChargeRequest, DescriptionIsOptional) {
  auto r = ParseChargeRequest(R"({"amount":1,"currency":"USD","order_id":"o","payment_method":"p"})");
  ASSERT_TRUE(std::holds_alternative<ChargeRequest>(r));
  EXPECT_FALSE(std::get<ChargeRequest>(r).description.has_value());
}

TEST(ParseChargeRequest, NamesTheFieldOfEachProblem) {
  const std::string ok_rest = R"("currency":"BRL","order_id":"o","payment_method":"p")";
  EXPECT_EQ(ErrorOf(R"({"currency":"BRL","order_id":"o","payment_method":"p"})").field, "amount");
  EXPECT_EQ(ErrorOf(R"({"amount":0,)" + ok_rest + "}").field, "amount");
  EXPECT_EQ(ErrorOf(R"({"amount":-5,)" + ok_rest + "}").field, "amount");
  EXPECT_EQ(ErrorOf(R"({"amount":10.5,)" + ok_rest + "}").field, "amount");
  EXPECT_EQ(ErrorOf(R"({"amount":"100",)" + ok_rest + "}").field, "amount");
  EXPECT_EQ(ErrorOf(R"({"amount":1e-3,)" + ok_rest + "}").field, "amount");
  EXPECT_EQ(ErrorOf(R"({"amount":0.0,)" + ok_rest + "}").field, "amount");
  EXPECT_EQ(ErrorOf(R"({"amount":-1.0,)" + ok_rest + "}").field, "amount");
  EXPECT_EQ(ErrorOf(R"({"amount":1e12,)" + ok_rest + "}").field, "amount");
  EXPECT_EQ(ErrorOf(R"({"amount":1e300,)" + ok_rest + "}").field, "amount");
  EXPECT_EQ(ErrorOf(R"({"amount":999999999999.5,)" + ok_rest + "}").field, "amount");
  EXPECT_EQ(ErrorOf(R"({"amount":99999999999999999999999,)" + ok_rest + "}").field, "amount");
  EXPECT_EQ(ErrorOf(R"({"amount":18446744073709551615,)" + ok_rest + "}").field, "amount");
  EXPECT_EQ(ErrorOf(R"({"amount":1,"currency":"brl","order_id":"o","payment_method":"p"})").field, "currency");
  EXPECT_EQ(ErrorOf(R"({"amount":1,"currency":"ABC","order_id":"o","payment_method":"p"})").field, "currency");
  EXPECT_EQ(ErrorOf(R"({"amount":1,"currency":"BRLX","order_id":"o","payment_method":"p"})").field, "currency");
  EXPECT_EQ(ErrorOf(R"({"amount":1,"currency":"BRL","payment_method":"p"})").field, "order_id");
  EXPECT_EQ(ErrorOf(R"({"amount":1,"currency":"BRL","order_id":"","payment_method":"p"})").field, "order_id");
  EXPECT_EQ(ErrorOf(R"({"amount":1,"currency":"BRL","order_id":7,"payment_method":"p"})").field, "order_id");
  EXPECT_EQ(ErrorOf(R"({"amount":1,"currency":"BRL","order_id":"o"})").field, "payment_method");
  EXPECT_EQ(ErrorOf(R"({"amount":1,"currency":"BRL","order_id":"o","payment_method":"p\u0000"})").field,
            "payment_method");
  EXPECT_EQ(ErrorOf(R"({"amount":1,"currency":"BRL","order_id":"o","payment_method":"p","description":5})").field,
            "description");
}

// docs/openapi.yaml's maxLength counts characters, as JSON Schema does: a schema-valid order id of 255
// four-byte characters (1,020 bytes) is accepted, the 256th character is not. payment_method is printable
// ASCII (its characters are its bytes, as the acquirer counts them).
TEST(ParseChargeRequest, LengthsAreInCharactersAsTheOpenApiSchemaCounts) {
  const auto body = [](const std::string& order_id, const std::string& payment_method, const std::string& description) {
    return R"({"amount":1,"currency":"BRL","order_id":")" + order_id + R"(","payment_method":")" + payment_method +
           R"(","description":")" + description + R"("})";
  };
  std::string emoji_255, e_acute_1000;
  for (int i = 0; i < 255; ++i) emoji_255 += "\U0001F600";
  for (int i = 0; i < 1000; ++i) e_acute_1000 += "\u00e9";
  auto ok = ParseChargeRequest(body(emoji_255, std::string(255, '~'), e_acute_1000));
  ASSERT_TRUE(std::holds_alternative<ChargeRequest>(ok)) << std::get<FieldError>(ok).problem;
  EXPECT_EQ(std::get<ChargeRequest>(ok).order_id.size(), 1020u);
  EXPECT_EQ(std::get<ChargeRequest>(ok).description->size(), 2000u);
  // As JSON escapes too: a character above U+FFFF is one character however it is written.
  std::string escaped_255;
  for (int i = 0; i < 255; ++i) escaped_255 += "\\ud83d\\ude00";
  EXPECT_TRUE(std::holds_alternative<ChargeRequest>(ParseChargeRequest(body(escaped_255, "p", "d"))));

  EXPECT_EQ(ErrorOf(body(emoji_255 + "x", "p", "d")).field, "order_id");
  EXPECT_EQ(ErrorOf(body("o", "p", e_acute_1000 + "e")).field, "description");
  EXPECT_EQ(ErrorOf(body("o", std::string(256, 'p'), "d")).field, "payment_method");
  EXPECT_EQ(ErrorOf(body("o", "pm_t\u00f6k", "d")).field, "payment_method");
  EXPECT_EQ(ErrorOf(body("o", "pm_\u00a0tok", "d")).field, "payment_method");
}

// JSON Schema's integer (docs/openapi.yaml's amount) is a number without a fraction however written: a
// Schemathesis run sent {"amount": 649.0} and got 400.
TEST(ParseChargeRequest, AnAmountWithoutAFractionIsAnIntegerHoweverItIsWritten) {
  const std::string rest = R"(,"currency":"BRL","order_id":"o","payment_method":"p"})";
  for (const auto& [text, amount] : std::vector<std::pair<std::string, std::int64_t>>{
           {"649.0", 649}, {"6.49e2", 649}, {"1e3", 1000}, {"1E0", 1}, {"999999999999.0", kMaxAmount}}) {
    auto r = ParseChargeRequest(R"({"amount":)" + text + rest);
    ASSERT_TRUE(std::holds_alternative<ChargeRequest>(r)) << text << ": " << std::get<FieldError>(r).problem;
    EXPECT_EQ(std::get<ChargeRequest>(r).amount, amount) << text;
    EXPECT_EQ(RequestFingerprint(std::get<ChargeRequest>(r)),
              RequestFingerprint(std::get<ChargeRequest>(ParseChargeRequest(R"({"amount":)" + std::to_string(amount) + rest))))
        << text << " is the same charge as " << amount;
  }
}

TEST(ParseChargeRequest, OnlyCurrenciesMoneyMovesInAreAccepted) {
  const auto with = [](const std::string& currency) {
    return R"({"amount":1,"currency":")" + currency + R"(","order_id":"o","payment_method":"p"})";
  };
  for (const auto* code : {"BRL", "USD", "EUR", "JPY", "XAF", "XOF", "XCD", "XPF"}) {
    EXPECT_TRUE(std::holds_alternative<ChargeRequest>(ParseChargeRequest(with(code)))) << code;
  }
  // Metals, bond units, units of account, the test and "no currency" codes, fund codes.
  for (const auto* code : {"XAU", "XAG", "XPD", "XPT", "XBA", "XBB", "XBC", "XBD", "XDR", "XSU", "XUA", "XTS",
                           "XXX", "BOV", "CHE", "CHW", "CLF", "COU", "MXV", "USN", "UYI", "UYW"}) {
    EXPECT_EQ(ErrorOf(with(code)).field, "currency") << code;
  }
  const auto accepted = AcceptedCurrencies();
  EXPECT_TRUE(std::is_sorted(accepted.begin(), accepted.end()));
  EXPECT_EQ(std::adjacent_find(accepted.begin(), accepted.end()), accepted.end());
}

TEST(ParseChargeRequest, DescriptionMaySpanLinesButHoldsNoOtherControlCharacter) {
  const auto with = [](const std::string& description) {
    return R"({"amount":1,"currency":"BRL","order_id":"o","payment_method":"p","description":")" + description +
           R"("})";
  };
  const auto ok = ParseChargeRequest(with(R"(two\nlines\r\n\tindented)"));
  ASSERT_TRUE(std::holds_alternative<ChargeRequest>(ok));
  EXPECT_EQ(*std::get<ChargeRequest>(ok).description, "two\nlines\r\n\tindented");
  for (const auto* bad : {R"(a\u0000b)", R"(\u0007)", R"(\u001b[31m)", R"(\u007f)"}) {
    EXPECT_EQ(ErrorOf(with(bad)).field, "description") << bad;
  }
}

TEST(ParseChargeRequest, UnknownFieldIsRefusedByName) {
  const auto e = ErrorOf(R"({"amount":1,"currency":"BRL","order_id":"o","payment_method":"p","captur":true})");
  EXPECT_EQ(e.field, "captur");
  EXPECT_EQ(e.problem, "is not a known field");
}

TEST(ParseChargeRequest, OversizedFieldsAreRefused) {
  const std::string long_id(kMaxIdentifierLength + 1, 'x');
  EXPECT_EQ(ErrorOf(R"({"amount":1,"currency":"BRL","order_id":")" + long_id + R"(","payment_method":"p"})").field,
            "order_id");
  const std::string long_description(kMaxDescriptionLength + 1, 'x');
  EXPECT_EQ(ErrorOf(R"({"amount":1,"currency":"BRL","order_id":"o","payment_method":"p","description":")" +
                    long_description + "\"}")
                .field,
            "description");
}

TEST(ParseChargeRequest, MalformedOrNestedBodiesAreRefusedWithoutCrashing) {
  EXPECT_EQ(ErrorOf("").field, "body");
  EXPECT_EQ(ErrorOf("{").field, "body");
  EXPECT_EQ(ErrorOf("[1,2]").field, "body");
  EXPECT_EQ(ErrorOf("null").field, "body");
  EXPECT_EQ(ErrorOf(R"({"amount":{"value":1}})").field, "body");
  EXPECT_EQ(ErrorOf(std::string(100000, '[') + std::string(100000, ']')).field, "body");
}

TEST(IsValidIdempotencyKey, VisibleAsciiFromOneTo255) {
  EXPECT_TRUE(IsValidIdempotencyKey("a"));
  EXPECT_TRUE(IsValidIdempotencyKey("550e8400-e29b-41d4-a716-446655440000"));
  EXPECT_TRUE(IsValidIdempotencyKey(std::string(255, '~')));
  EXPECT_FALSE(IsValidIdempotencyKey(""));
  EXPECT_FALSE(IsValidIdempotencyKey(std::string(256, 'k')));
  EXPECT_FALSE(IsValidIdempotencyKey("has space"));
  EXPECT_FALSE(IsValidIdempotencyKey("tab\t"));
  EXPECT_FALSE(IsValidIdempotencyKey("chave-ção"));
}

TEST(RequestFingerprint, ChangesWithEveryParameterAndNotOtherwise) {
  ChargeRequest base{25000, "BRL", "PED-1", "pm_tok_visa", "x"};
  const auto fp = RequestFingerprint(base);
  EXPECT_EQ(fp, RequestFingerprint(base));
  auto changed = base;
  changed.amount = 25001;
  EXPECT_NE(RequestFingerprint(changed), fp);
  changed = base;
  changed.currency = "USD";
  EXPECT_NE(RequestFingerprint(changed), fp);
  changed = base;
  changed.order_id = "PED-2";
  EXPECT_NE(RequestFingerprint(changed), fp);
  changed = base;
  changed.payment_method = "pm_tok_master";
  EXPECT_NE(RequestFingerprint(changed), fp);
  changed = base;
  changed.description.reset();
  EXPECT_NE(RequestFingerprint(changed), fp);
  changed = base;
  changed.description = "";
  EXPECT_NE(RequestFingerprint(changed), RequestFingerprint(ChargeRequest{25000, "BRL", "PED-1", "pm_tok_visa", {}}));
}

TEST(RequestFingerprint, FieldBoundariesCannotBeShifted) {
  EXPECT_NE(RequestFingerprint({1, "BRL", "ab", "c", {}}), RequestFingerprint({1, "BRL", "a", "bc", {}}));
}

}  // namespace
}  // namespace charge_outbox::charge_api
