#include "api_responses.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

#include <set>

#include "api_key_cache.hpp"
#include "charge_service.hpp"
#include "router.hpp"

namespace charge_outbox::charge_api {
namespace {

namespace json = boost::json;
using charges::ChargeStatus;
using ::testing::HasSubstr;

charges::Charge SampleCharge(ChargeStatus status) {
  charges::Charge c;
  c.id = "0f8fad5b-d9cb-469f-a165-70867728950e";
  c.merchant_id = "00000000-0000-4000-8000-000000000001";
  c.order_id = "PED-0001";
  c.amount = 25000;
  c.currency = "BRL";
  c.payment_method = "pm_tok_secret_visa";
  c.status = status;
  c.created_at = charges::Timestamp{std::chrono::milliseconds{1'764'471'180'367}};
  c.updated_at = c.created_at;
  return c;
}

TEST(ChargeJson, ShowsTheChargeButNeverThePaymentMethod) {
  auto c = SampleCharge(ChargeStatus::kCaptured);
  c.acquirer_capture_id = "cap_1";
  const auto body = ChargeJson(c);
  const auto v = json::parse(body).as_object();
  EXPECT_EQ(v.at("id").as_string(), "ch_0f8fad5bd9cb469fa16570867728950e");
  EXPECT_EQ(v.at("status").as_string(), "captured");
  EXPECT_EQ(v.at("amount").as_int64(), 25000);
  EXPECT_EQ(v.at("acquirer_capture_id").as_string(), "cap_1");
  EXPECT_EQ(v.at("created_at").as_string(), "2025-11-30T02:53:00.367Z");
  EXPECT_THAT(body, ::testing::Not(HasSubstr("pm_tok")));
}

TEST(ResponseFor, MapsEveryStatus) {
  EXPECT_EQ(ResponseFor(SampleCharge(ChargeStatus::kCaptured)).status, 201);
  EXPECT_EQ(ResponseFor(SampleCharge(ChargeStatus::kPending)).status, 202);
  EXPECT_EQ(ResponseFor(SampleCharge(ChargeStatus::kNeedsReview)).status, 202);
  EXPECT_EQ(ResponseFor(SampleCharge(ChargeStatus::kCanceled)).status, 402);
  auto declined = SampleCharge(ChargeStatus::kFailed);
  declined.decline_code = "card_declined";
  const auto r = ResponseFor(declined);
  EXPECT_EQ(r.status, 402);
  const auto p = json::parse(r.body).as_object();
  EXPECT_EQ(p.at("decline_code").as_string(), "card_declined");
  EXPECT_EQ(p.at("charge_id").as_string(), "ch_0f8fad5bd9cb469fa16570867728950e");
  EXPECT_EQ(p.at("status").as_int64(), 402);
}

// A 402 says what the record holds and that the key is spent, and claims no more than the record: a
// canceled charge's capture was voided, a person's failed is their decision.
TEST(ResponseFor, A402SaysWhatTheRecordHoldsAndThatANewAttemptNeedsANewKey) {
  const auto detail = [](const charges::Charge& c) {
    return std::string(json::parse(ResponseFor(c).body).at("detail").as_string());
  };
  auto declined = SampleCharge(ChargeStatus::kFailed);
  declined.decline_code = "insufficient_funds";
  EXPECT_THAT(detail(declined), HasSubstr("declined the payment: insufficient_funds"));
  auto canceled = SampleCharge(ChargeStatus::kCanceled);
  canceled.failure_reason = "deadline_passed_voided";
  EXPECT_THAT(detail(canceled), HasSubstr("No money was kept: the capture was voided (deadline_passed_voided)"));
  auto decided = SampleCharge(ChargeStatus::kFailed);
  decided.failure_reason = "operator_decision";
  EXPECT_THAT(detail(decided), HasSubstr("A person decided"));
  EXPECT_THAT(detail(decided), ::testing::Not(HasSubstr("No money was taken")));
  auto unreachable = SampleCharge(ChargeStatus::kFailed);
  unreachable.failure_reason = "acquirer_unreachable";
  EXPECT_THAT(detail(unreachable), HasSubstr("No money was taken: acquirer_unreachable"));
  for (const auto& c : {declined, canceled, decided, unreachable}) {
    EXPECT_THAT(detail(c), HasSubstr("a new attempt needs a new key"));
  }
}

TEST(ToHttp, SetsLocationContentTypeAndReplayHeader) {
  const auto created = ToHttp({201, "{}"}, "ch_x", true, std::chrono::seconds{9});
  EXPECT_EQ(created.result_int(), 201u);
  EXPECT_EQ(created["Location"], "/v1/charges/ch_x");
  EXPECT_EQ(created["Idempotent-Replayed"], "true");
  EXPECT_EQ(created["Content-Type"], "application/json");
  EXPECT_EQ(created.count("Retry-After"), 0u);
  const auto declined = ToHttp({402, "{}"}, "ch_x", false, std::chrono::seconds{9});
  EXPECT_EQ(declined["Content-Type"], "application/problem+json");
  EXPECT_EQ(declined.count("Idempotent-Replayed"), 0u);
  EXPECT_EQ(declined.count("Location"), 0u);
  EXPECT_EQ(declined.count("Retry-After"), 0u);
}

// Issue 43: a 202 says where to look and when to come back (never sooner than 1 s).
TEST(ToHttp, A202CarriesLocationAndRetryAfter) {
  const auto pending = ToHttp({202, "{}"}, "ch_x", false, std::chrono::seconds{8});
  EXPECT_EQ(pending["Location"], "/v1/charges/ch_x");
  EXPECT_EQ(pending["Retry-After"], "8");
  EXPECT_EQ(ToHttp({202, "{}"}, "ch_x", true, std::chrono::seconds{0})["Retry-After"], "1");
}

TEST(ToResponse, EveryErrorIsProblemJsonWithItsStatus) {
  const std::pair<ApiErrc, unsigned> expected[] = {
      {ApiErrc::kMissingIdempotencyKey, 400}, {ApiErrc::kMalformedIdempotencyKey, 400},
      {ApiErrc::kInvalidField, 400},          {ApiErrc::kApiKeyMissing, 401},
      {ApiErrc::kAuthSchemeNotBearer, 401},   {ApiErrc::kApiKeyMalformed, 401},
      {ApiErrc::kApiKeyUnknown, 401},         {ApiErrc::kTooManyFailedAuthentications, 429},
      {ApiErrc::kRateLimited, 429},
      {ApiErrc::kUnsupportedMediaType, 415},  {ApiErrc::kNotFound, 404},
      {ApiErrc::kMethodNotAllowed, 405},      {ApiErrc::kIdempotencyKeyReused, 422},
      {ApiErrc::kRequestInFlight, 409},       {ApiErrc::kDatabaseUnavailable, 503},
      {ApiErrc::kAcquirerBusy, 503},          {ApiErrc::kInternal, 500}};
  for (const auto& [code, status] : expected) {
    const auto r = ToResponse(ApiError{code, "detail", "amount", std::chrono::seconds{7}, "ch_x"});
    EXPECT_EQ(r.result_int(), status);
    EXPECT_EQ(r["Content-Type"], "application/problem+json");
    const auto p = json::parse(r.body()).as_object();
    EXPECT_EQ(p.at("status").as_int64(), status);
    EXPECT_TRUE(p.contains("title"));
    EXPECT_THAT(std::string(p.at("type").as_string()), ::testing::StartsWith(kProblemTypePrefix)) << status;
  }
  EXPECT_EQ(ToResponse(ApiError{ApiErrc::kRequestInFlight, "", "", std::chrono::seconds{7}})["Retry-After"], "7");
  EXPECT_EQ(ToResponse(ApiError{ApiErrc::kDatabaseUnavailable})["Retry-After"], "1");
  EXPECT_EQ(ToResponse(ApiError{ApiErrc::kAcquirerBusy, "", "", std::chrono::seconds{2}})["Retry-After"], "2");
  const auto invalid = json::parse(ToResponse(ApiError{ApiErrc::kInvalidField, "is required", "amount"}).body());
  EXPECT_EQ(invalid.at("field").as_string(), "amount");
}

// Issue 41, defect 1: no answer claims what the server cannot know. A 503 is given while the database does
// not answer (or our own acquirer queue is full), when the key may already have a captured charge: it
// never says "nothing was charged" and tells the client to keep the key. A 422 says what this request
// did (nothing) and names the key's charge, and never invites a new key. Before the fix the 503 said
// "Nothing was charged" and the 422 "nothing was charged. Use a new key for a new charge".
TEST(ToResponse, NoRetryableAnswerClaimsNothingWasChargedOrInvitesANewKey) {
  for (const auto code : {ApiErrc::kDatabaseUnavailable, ApiErrc::kAcquirerBusy, ApiErrc::kRateLimited,
                          ApiErrc::kRequestInFlight, ApiErrc::kInternal, ApiErrc::kIdempotencyKeyReused}) {
    const auto r = ToResponse(ApiError{code, "db down", "", std::chrono::seconds{1}, "ch_5"});
    const std::string detail(json::parse(r.body()).at("detail").as_string());
    EXPECT_THAT(detail, ::testing::Not(HasSubstr("othing was charged"))) << r.result_int();
    EXPECT_THAT(detail, ::testing::Not(HasSubstr("new key for"))) << r.result_int();
    EXPECT_THAT(detail, ::testing::Not(HasSubstr("Use a new key"))) << r.result_int();
  }
  for (const auto code : {ApiErrc::kDatabaseUnavailable, ApiErrc::kAcquirerBusy}) {
    const std::string detail(json::parse(ToResponse(ApiError{code}).body()).at("detail").as_string());
    EXPECT_THAT(detail, HasSubstr("same key")) << detail;
    EXPECT_THAT(detail, HasSubstr("do not start over with a new key")) << detail;
  }
  const auto reused = json::parse(ToResponse(ApiError{ApiErrc::kIdempotencyKeyReused, "", "", {}, "ch_5"}).body());
  EXPECT_EQ(reused.at("charge_id").as_string(), "ch_5");
  EXPECT_THAT(std::string(reused.at("detail").as_string()), HasSubstr("This request did nothing"));
  EXPECT_THAT(std::string(reused.at("detail").as_string()), HasSubstr("GET /v1/charges/ch_5"));
}

// Issue 43: a 401 tells missing, malformed and unknown credentials apart, each with its own type, and the
// challenge RFC 6750 section 3 gives it: no error code without bearer credentials, invalid_token for a
// token that is malformed, unknown or revoked. Unknown and revoked are one answer.
TEST(ToResponse, A401SaysWhichCredentialsWereWrongWithItsBearerChallenge) {
  struct Case {
    ApiErrc code;
    const char* type;
    const char* challenge;
  };
  const Case cases[] = {
      {ApiErrc::kApiKeyMissing, "api-key-missing", "Bearer"},
      {ApiErrc::kAuthSchemeNotBearer, "api-key-malformed", "Bearer"},
      {ApiErrc::kApiKeyMalformed, "api-key-malformed",
       R"(Bearer error="invalid_token", error_description="malformed API key")"},
      {ApiErrc::kApiKeyUnknown, "api-key-unknown",
       R"(Bearer error="invalid_token", error_description="unknown or revoked API key")"},
  };
  std::set<std::string> details;
  for (const auto& c : cases) {
    const auto r = ToResponse(ApiError{c.code});
    EXPECT_EQ(r.result_int(), 401u);
    EXPECT_EQ(r["WWW-Authenticate"], c.challenge) << c.type;
    const auto p = json::parse(r.body()).as_object();
    EXPECT_EQ(p.at("type").as_string(), ProblemType(c.type));
    details.insert(std::string(p.at("detail").as_string()));
  }
  EXPECT_EQ(details.size(), 4u);
  EXPECT_THAT(std::string(json::parse(ToResponse(ApiError{ApiErrc::kApiKeyUnknown}).body()).at("detail").as_string()),
              HasSubstr("unknown or revoked"));
}

// Issue 43: a POST refused before its key was used says so; the same refusal of a GET does not (a GET's
// idempotency_key is a query, nothing to keep). Both Idempotency-Key refusals say nothing was stored.
TEST(ToResponse, ARefusalBeforeTheKeyWasUsedSaysTheClientMayKeepIt) {
  const auto detail = [](const ApiError& e) {
    return std::string(json::parse(ToResponse(e).body()).at("detail").as_string());
  };
  const auto post = detail(ApiError{.code = ApiErrc::kInvalidField, .detail = "is required", .field = "amount",
                                    .key_unused = true});
  EXPECT_EQ(post, "amount is required. Nothing was stored for this request under its Idempotency-Key: fix it and "
                  "send it again with the same key.");
  const auto get = detail(ApiError{.code = ApiErrc::kInvalidField, .detail = "is required", .field = "idempotency_key"});
  EXPECT_EQ(get, "idempotency_key is required.");
  EXPECT_THAT(detail(ApiError{.code = ApiErrc::kUnsupportedMediaType, .key_unused = true}),
              HasSubstr("send it again with the same key"));
  for (const auto code : {ApiErrc::kMissingIdempotencyKey, ApiErrc::kMalformedIdempotencyKey}) {
    EXPECT_THAT(detail(ApiError{code}), HasSubstr("Nothing was stored for this request."));
  }
}

TEST(ReadBearer, TellsMissingOtherSchemesMalformedKeysAndKeysApart) {
  using Form = BearerCredentials::Form;
  EXPECT_EQ(ReadBearer(std::nullopt).form, Form::kMissing);
  EXPECT_EQ(ReadBearer("").form, Form::kMissing);
  EXPECT_EQ(ReadBearer("   ").form, Form::kMissing);
  EXPECT_EQ(ReadBearer("Basic dXNlcjpwYXNz").form, Form::kOtherScheme);
  EXPECT_EQ(ReadBearer("Bearersk_test_1").form, Form::kOtherScheme);
  EXPECT_EQ(ReadBearer("sk_test_1").form, Form::kOtherScheme);
  EXPECT_EQ(ReadBearer("Bearer").form, Form::kMalformedKey);
  EXPECT_EQ(ReadBearer("Bearer ").form, Form::kMalformedKey);
  EXPECT_EQ(ReadBearer("Bearer two words").form, Form::kMalformedKey);
  EXPECT_EQ(ReadBearer("Bearer " + std::string(257, 'k')).form, Form::kMalformedKey);
  EXPECT_EQ(ReadBearer("Bearer sk_\x01").form, Form::kMalformedKey);
  const auto key = ReadBearer("bEaReR  " + std::string(256, 'k') + " ");
  EXPECT_EQ(key.form, Form::kKey);
  EXPECT_EQ(key.key, std::string(256, 'k'));
}

TEST(BearerKey, ParsesTheSchemeCaseInsensitively) {
  EXPECT_EQ(BearerKey("Bearer sk_test_1"), "sk_test_1");
  EXPECT_EQ(BearerKey("bearer   sk_test_1 "), "sk_test_1");
  EXPECT_FALSE(BearerKey("").has_value());
  EXPECT_FALSE(BearerKey("Bearer ").has_value());
  EXPECT_FALSE(BearerKey("Basic dXNlcjpwYXNz").has_value());
  EXPECT_FALSE(BearerKey("Bearer two words").has_value());
}

TEST(IsJsonMediaType, AcceptsParametersAndCase) {
  EXPECT_TRUE(IsJsonMediaType("application/json"));
  EXPECT_TRUE(IsJsonMediaType("Application/JSON; charset=utf-8"));
  EXPECT_FALSE(IsJsonMediaType("text/plain"));
  EXPECT_FALSE(IsJsonMediaType("application/jsonx"));
  EXPECT_FALSE(IsJsonMediaType(""));
}

}  // namespace
}  // namespace charge_outbox::charge_api
