// The Stripe dialect's request parsing: form encoding, each route's parameters, the search query.
#include "stripe_requests.hpp"

#include <gtest/gtest.h>

namespace charge_outbox::acquirer_sim {
namespace {

FormParams Form(std::string_view text) {
  auto params = ParseForm(text);
  EXPECT_TRUE(params.has_value()) << text;
  return params.value_or(FormParams{});
}

constexpr std::string_view kCreate =
    "amount=25000&currency=brl&payment_method=pm_tok_visa&confirm=true&off_session=true&"
    "payment_method_types%5B%5D=card&metadata%5Bcharge_id%5D=ch_1&expand%5B%5D=latest_charge";

TEST(StripeForm, DecodesPercentEscapesAndPlusAsSpace) {
  EXPECT_EQ(Form("metadata%5Bcharge_id%5D=a+b%2Bc&expand[]=x"),
            (FormParams{{"metadata[charge_id]", "a b+c"}, {"expand[]", "x"}}));
  EXPECT_EQ(Form(""), FormParams{});
  EXPECT_EQ(Form("a=&&b=1"), (FormParams{{"a", ""}, {"b", "1"}}));
  EXPECT_FALSE(ParseForm("a=%zz").has_value());
  EXPECT_FALSE(ParseForm("a=%4").has_value());
  EXPECT_FALSE(ParseForm("novalue").has_value());
  EXPECT_FALSE(ParseForm("=1").has_value());
}

TEST(StripeForm, CanonicalParamsIgnoreOrderAndEncodingButNotValuesOrRoute) {
  const auto a = CanonicalParams("POST /v1/payment_intents", Form("amount=1&currency=brl&metadata[charge_id]=x"));
  EXPECT_EQ(a, CanonicalParams("POST /v1/payment_intents", Form("metadata%5Bcharge_id%5D=x&currency=brl&amount=1")));
  EXPECT_NE(a, CanonicalParams("POST /v1/payment_intents", Form("amount=2&currency=brl&metadata[charge_id]=x")));
  EXPECT_NE(a, CanonicalParams("POST /v1/refunds", Form("amount=1&currency=brl&metadata[charge_id]=x")));
  // A value holding the separators of another encoding does not collide with two parameters.
  EXPECT_NE(CanonicalParams("r", Form("a=1%26b%3D2")), CanonicalParams("r", Form("a=1&b=2")));
}

TEST(StripeIntentCreate, ReadsTheAdaptersRequestWithTheCurrencyUpperCase) {
  const auto create = ParseIntentCreate(Form(kCreate));
  ASSERT_TRUE(create.has_value()) << create.error().message;
  EXPECT_EQ(create->request, (CaptureRequest{25000, "BRL", "ch_1", "pm_tok_visa"}));
  EXPECT_TRUE(create->expand_latest_charge);
  const auto minimal =
      ParseIntentCreate(Form("amount=1&currency=usd&payment_method=pm&confirm=true&metadata[charge_id]=c&"
                             "metadata[x]=y"));
  ASSERT_TRUE(minimal.has_value());
  EXPECT_FALSE(minimal->expand_latest_charge);
}

TEST(StripeIntentCreate, RefusalsNameTheParameterAndTheCode) {
  const auto error = [](std::string_view text) {
    const auto r = ParseIntentCreate(Form(text));
    EXPECT_FALSE(r.has_value()) << text;
    return r.has_value() ? StripeParamError{} : r.error();
  };
  const std::string base(kCreate);
  EXPECT_EQ(error(base + "&customer=cus_1").code, "parameter_unknown");
  EXPECT_EQ(error(base + "&customer=cus_1").param, "customer");
  EXPECT_EQ(error("currency=brl&payment_method=pm&confirm=true&metadata[charge_id]=c").code, "parameter_missing");
  EXPECT_EQ(error("currency=brl&payment_method=pm&confirm=true&metadata[charge_id]=c").param, "amount");
  EXPECT_EQ(error("amount=1x&currency=brl&payment_method=pm&confirm=true&metadata[charge_id]=c").code,
            "parameter_invalid_integer");
  EXPECT_EQ(error("amount=0&currency=brl&payment_method=pm&confirm=true&metadata[charge_id]=c").param, "amount");
  EXPECT_EQ(error("amount=1&currency=BRL&payment_method=pm&confirm=true&metadata[charge_id]=c").param, "currency");
  EXPECT_EQ(error("amount=1&currency=brl&payment_method=pm&confirm=false&metadata[charge_id]=c").param, "confirm");
  EXPECT_EQ(error("amount=1&currency=brl&payment_method=pm&metadata[charge_id]=c").param, "confirm");
  EXPECT_EQ(error("amount=1&currency=brl&payment_method=pm&confirm=true").param, "metadata[charge_id]");
  EXPECT_EQ(error("amount=1&currency=brl&payment_method=pm&confirm=true&metadata[charge_id]=").param,
            "metadata[charge_id]");
  EXPECT_EQ(error(base + "&off_session=maybe").param, "off_session");
  EXPECT_EQ(error("amount=1&currency=brl&payment_method=pm&confirm=true&metadata[charge_id]=c&"
                  "off_session=yes").param,
            "off_session");
  EXPECT_EQ(error(base + "&payment_method_types[]=sepa_debit").param, "payment_method_types[]");
  EXPECT_EQ(error(base + "&expand[]=customer").param, "expand");
  EXPECT_EQ(error(base + "&amount=2").param, "amount");  // given twice
}

TEST(StripeRefundCreate, ReadsTheParametersAndRefusesOthers) {
  const auto refund = ParseRefundCreate(Form("payment_intent=pi_1&amount=500&reason=duplicate&metadata[charge_id]=c"));
  ASSERT_TRUE(refund.has_value());
  EXPECT_EQ(refund->payment_intent, "pi_1");
  EXPECT_EQ(refund->amount, 500);
  EXPECT_EQ(refund->reason, "duplicate");
  EXPECT_EQ(refund->metadata.at("charge_id"), "c");
  EXPECT_EQ(ParseRefundCreate(Form("amount=5")).error().param, "payment_intent");
  EXPECT_EQ(ParseRefundCreate(Form("payment_intent=pi_1&reason=because")).error().param, "reason");
  EXPECT_EQ(ParseRefundCreate(Form("payment_intent=pi_1&charge=ch_1")).error().code, "parameter_unknown");
}

TEST(StripeSearch, UnderstandsOnlyTheChargeIdQueryInEitherQuotes) {
  EXPECT_EQ(ParseChargeIdQuery("metadata['charge_id']:'ch_1'"), "ch_1");
  EXPECT_EQ(ParseChargeIdQuery("metadata[\"charge_id\"]:\"ch_1\""), "ch_1");
  EXPECT_EQ(ParseChargeIdQuery(R"(metadata['charge_id']:'it\'s')"), "it's");
  EXPECT_EQ(ParseChargeIdQuery(" metadata['charge_id']:'x' "), "x");
  EXPECT_FALSE(ParseChargeIdQuery("metadata['charge_id']:'ch_1' AND status:'succeeded'"));
  EXPECT_FALSE(ParseChargeIdQuery("metadata['charge_id']:ch_1"));
  EXPECT_FALSE(ParseChargeIdQuery("metadata['charge_id']:''"));
  EXPECT_FALSE(ParseChargeIdQuery("metadata['order']:'x'"));
  EXPECT_FALSE(ParseChargeIdQuery("amount>100"));

  const auto search = ParseIntentSearch(
      Form("query=metadata%5B%27charge_id%27%5D%3A%27ch_9%27&limit=10&expand%5B%5D=data.latest_charge"));
  ASSERT_TRUE(search.has_value()) << search.error().message;
  EXPECT_EQ(search->charge_id, "ch_9");
  EXPECT_EQ(search->limit, 10u);
  EXPECT_TRUE(search->expand_latest_charge);
  EXPECT_EQ(ParseIntentSearch(Form("query=status:'succeeded'")).error().param, "query");
  EXPECT_EQ(ParseIntentSearch(Form("limit=5")).error().param, "query");
  EXPECT_EQ(ParseIntentSearch(Form("query=metadata['charge_id']:'x'&limit=101")).error().param, "limit");
  EXPECT_EQ(ParseIntentSearch(Form("query=metadata['charge_id']:'x'&page=" + SearchPageToken(3)))->offset, 3u);
  EXPECT_EQ(ParseIntentSearch(Form("query=metadata['charge_id']:'x'&page=zzz")).error().param, "page");
}

TEST(StripeList, CreatedBoundsAreSecondsAsAHalfOpenRangeOfMicroseconds) {
  const auto list = ParseIntentList(Form("created%5Bgte%5D=100&created%5Blt%5D=200&limit=3&starting_after=pi_1"));
  ASSERT_TRUE(list.has_value()) << list.error().message;
  EXPECT_EQ(list->created.from_us, 100'000'000);
  EXPECT_EQ(list->created.to_us, 200'000'000);
  EXPECT_EQ(list->limit, 3u);
  EXPECT_EQ(list->starting_after, "pi_1");
  const auto inclusive = ParseIntentList(Form("created[gt]=100&created[lte]=200"));
  EXPECT_EQ(inclusive->created.from_us, 101'000'000);
  EXPECT_EQ(inclusive->created.to_us, 201'000'000);
  EXPECT_EQ(ParseIntentList(Form(""))->limit, 10u);
  EXPECT_EQ(ParseIntentList(Form("created[gte]=soon")).error().param, "created[gte]");
  EXPECT_EQ(ParseIntentList(Form("limit=0")).error().param, "limit");
  EXPECT_EQ(ParseIntentList(Form("ending_before=pi_1")).error().code, "parameter_unknown");
}

TEST(StripeEvents, TypesFilterAndTypesTheSimulatorNeverWritesMatchNothing) {
  const auto events = ParseEventList(
      Form("types%5B%5D=payment_intent.succeeded&types%5B%5D=payment_intent.payment_failed&"
           "created%5Bgte%5D=5&limit=100"));
  ASSERT_TRUE(events.has_value()) << events.error().message;
  EXPECT_EQ(events->types, (std::vector<StripeEventType>{StripeEventType::kPaymentIntentSucceeded,
                                                         StripeEventType::kPaymentIntentPaymentFailed}));
  EXPECT_FALSE(events->matches_nothing);
  EXPECT_EQ(ParseEventList(Form("type=charge.refunded"))->types,
            std::vector<StripeEventType>{StripeEventType::kChargeRefunded});
  EXPECT_TRUE(ParseEventList(Form("type=customer.created"))->matches_nothing);
  EXPECT_TRUE(ParseEventList(Form(""))->types.empty());
  EXPECT_FALSE(ParseEventList(Form(""))->matches_nothing);
  EXPECT_EQ(ParseEventList(Form("type=charge.refunded&types[]=charge.refunded")).error().param, "type");
}

}  // namespace
}  // namespace charge_outbox::acquirer_sim
