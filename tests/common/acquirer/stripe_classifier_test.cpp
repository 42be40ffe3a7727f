// The Stripe adapter's table (docs/stripe.md, "What Stripe's answers become"), row by row: each Stripe
// answer, built by hand as the transport would hand it over, and the outcome kind, evidence class and
// retryability it must become. No sockets.
#include "charge_outbox/acquirer/stripe_classifier.hpp"

#include <gtest/gtest.h>

#include <string>

#include "printers.hpp"

namespace charge_outbox::acquirer {
namespace {

using std::chrono::system_clock;

const system_clock::time_point kNow = std::chrono::sys_days{std::chrono::year{2026} / 12 / 5} + std::chrono::hours{12};
const CaptureRequest kSent{"m_1:key-1", 25000, "BRL", "ch_123", "pm_card_visa"};
const LookupRequest kLookup{"m_1:key-1", ExpectedCapture{25000, "BRL", "ch_123"}, std::nullopt};

std::string Intent(std::string_view status, std::string_view extra = "", std::int64_t amount = 25000,
                   std::string_view charge_id = "ch_123", std::string_view id = "pi_1") {
  return std::string(R"({"id":")") + std::string(id) + R"(","object":"payment_intent","amount":)" +
         std::to_string(amount) + R"(,"currency":"brl","status":")" + std::string(status) +
         R"(","created":1796558400,"metadata":{"charge_id":")" + std::string(charge_id) + R"("})" +
         std::string(extra) + "}";
}

std::string Charge(bool refunded) {
  return std::string(R"(,"latest_charge":{"id":"ch_x","object":"charge","amount":25000,"amount_refunded":)") +
         (refunded ? "25000" : "0") + R"(,"refunded":)" + (refunded ? "true" : "false") + "}";
}

std::string Error(std::string_view type, std::string_view code = "", std::string_view decline_code = "") {
  std::string body = std::string(R"({"error":{"type":")") + std::string(type) + '"';
  if (!code.empty()) body += std::string(R"(,"code":")") + std::string(code) + '"';
  if (!decline_code.empty()) body += std::string(R"(,"decline_code":")") + std::string(decline_code) + '"';
  return body + "}}";
}

std::string Search(std::initializer_list<std::string> intents) {
  std::string data;
  for (const auto& intent : intents) data += (data.empty() ? "" : ",") + intent;
  return R"({"object":"search_result","data":[)" + data + R"(],"has_more":false})";
}

TransportResult Response(int status, std::string body, std::vector<std::pair<std::string, std::string>> headers = {}) {
  TransportResult r;
  r.status = TransportStatus::kResponse;
  r.response = HttpResponse{status, std::move(headers), std::move(body)};
  return r;
}

AttemptOutcome Capture(const TransportResult& r) { return ClassifyStripeCapture(r, kSent, kNow); }
AttemptOutcome Lookup(const TransportResult& r) { return ClassifyStripeSearch(r, kLookup, kNow); }

void ExpectClass(const AttemptOutcome& o, OutcomeKind kind, EvidenceClass evidence, Retryability retry) {
  EXPECT_EQ(o.kind, kind) << ToString(o.kind) << " " << o.detail;
  EXPECT_EQ(o.evidence(), evidence) << ToString(o.evidence());
  EXPECT_EQ(o.retryability(), retry) << ToString(o.retryability());
}

// ---- PaymentIntents ------------------------------------------------------------------------------------

TEST(StripeTable, SucceededAndOursIsCaptured) {
  const auto o = Capture(Response(200, Intent("succeeded", Charge(false))));
  ExpectClass(o, OutcomeKind::kCaptured, EvidenceClass::kApproved, Retryability::kDefinitive);
  ASSERT_TRUE(o.capture.has_value());
  EXPECT_EQ(o.capture->id, "pi_1");
  EXPECT_EQ(o.capture->currency, "BRL");  // Stripe's lower case, ours upper
  EXPECT_EQ(o.capture->reference, "ch_123");
  EXPECT_EQ(o.capture->created_at, "2026-12-06T12:00:00.000000Z");  // created: Unix seconds
  EXPECT_EQ(o.capture->status, CaptureStatus::kCaptured);
}

// The fuzz target's finding: a `created` past 2262 overflowed the conversion to a time point (undefined
// behaviour). No PaymentIntent was made before 1970 or after 2199: such a one is not read at all.
TEST(StripeTable, APaymentIntentCreatedAtAnImpossibleTimeIsUnreadable) {
  const auto created_at = [](std::string_view created) {
    auto body = Intent("succeeded", Charge(false));
    body.replace(body.find("1796558400"), 10, created);
    return Capture(Response(200, body));
  };
  for (const auto* created : {"9670183200", "-1", "9223372036854775807", "7258118400"}) {
    EXPECT_EQ(created_at(created).kind, OutcomeKind::kUntrustedResponse) << created;
  }
  const auto latest = created_at(std::to_string(kLatestStripeCreated));
  EXPECT_EQ(latest.kind, OutcomeKind::kCaptured);
  ASSERT_TRUE(latest.capture.has_value());
  EXPECT_EQ(latest.capture->created_at, "2199-12-31T23:59:59.000000Z");
  EXPECT_EQ(created_at("0").kind, OutcomeKind::kCaptured);
  EXPECT_EQ(StripeCreatedAt(9670183200), "2199-12-31T23:59:59.000000Z");  // clamped, never overflowed
}

TEST(StripeTable, SucceededWithTheLatestChargeAsAnIdIsCaptured) {
  ExpectClass(Capture(Response(200, Intent("succeeded", R"(,"latest_charge":"ch_x")"))), OutcomeKind::kCaptured,
              EvidenceClass::kApproved, Retryability::kDefinitive);
}

TEST(StripeTable, SucceededAndRefundedIsAVoidedCaptureToALookup) {
  const auto o = Lookup(Response(200, Search({Intent("succeeded", Charge(true))})));
  ExpectClass(o, OutcomeKind::kCaptured, EvidenceClass::kApproved, Retryability::kDefinitive);
  EXPECT_EQ(o.capture->status, CaptureStatus::kVoided);
}

TEST(StripeTable, SucceededAndRefundedIsAMismatchToACreate) {
  ExpectClass(Capture(Response(200, Intent("succeeded", Charge(true)))), OutcomeKind::kMismatch,
              EvidenceClass::kUnknown, Retryability::kNever);
}

TEST(StripeTable, SucceededButNotOursIsAMismatch) {
  ExpectClass(Capture(Response(200, Intent("succeeded", "", 99))), OutcomeKind::kMismatch, EvidenceClass::kUnknown,
              Retryability::kNever);
  ExpectClass(Lookup(Response(200, Search({Intent("succeeded", "", 25000, "ch_other")}))), OutcomeKind::kMismatch,
              EvidenceClass::kUnknown, Retryability::kNever);
}

TEST(StripeTable, TwoPaymentIntentsNamingOneChargeAreAMismatch) {
  const auto o = Lookup(Response(200, Search({Intent("succeeded", "", 25000, "ch_123", "pi_1"),
                                              Intent("succeeded", "", 25000, "ch_123", "pi_2")})));
  ExpectClass(o, OutcomeKind::kMismatch, EvidenceClass::kUnknown, Retryability::kNever);
  EXPECT_NE(o.detail.find("2 PaymentIntents"), std::string::npos) << o.detail;
}

TEST(StripeTable, RequiresPaymentMethodWithAnErrorIsADecline) {
  const auto o = Lookup(Response(
      200, Search({Intent("requires_payment_method",
                          R"(,"last_payment_error":{"type":"card_error","code":"card_declined","decline_code":"insufficient_funds"})")})));
  ExpectClass(o, OutcomeKind::kDeclined, EvidenceClass::kDeclined, Retryability::kDefinitive);
  EXPECT_EQ(o.decline_code, "insufficient_funds");
}

TEST(StripeTable, ADeclinedPaymentIntentThatIsNotOursIsAMismatch) {
  const auto o = Lookup(Response(
      200, Search({Intent("requires_payment_method", R"(,"last_payment_error":{"type":"card_error","code":"card_declined"})",
                          1099)})));
  ExpectClass(o, OutcomeKind::kMismatch, EvidenceClass::kUnknown, Retryability::kNever);
  EXPECT_FALSE(o.decline_code.has_value());
}

TEST(StripeTable, ADeclineWithoutADeclineCodeTakesItsCode) {
  const auto o = Lookup(Response(
      200, Search({Intent("requires_payment_method", R"(,"last_payment_error":{"type":"card_error","code":"expired_card"})")})));
  EXPECT_EQ(o.decline_code, "expired_card");
}

TEST(StripeTable, ADeclineWithOnlyAnErrorTypeTakesItsType) {
  const auto o = Lookup(Response(
      200, Search({Intent("requires_payment_method", R"(,"last_payment_error":{"type":"card_error"})")})));
  ExpectClass(o, OutcomeKind::kDeclined, EvidenceClass::kDeclined, Retryability::kDefinitive);
  EXPECT_EQ(o.decline_code, "card_error");
}

TEST(StripeTable, RequiresPaymentMethodWithoutAnErrorIsForAPerson) {
  ExpectClass(Lookup(Response(200, Search({Intent("requires_payment_method")}))), OutcomeKind::kContractError,
              EvidenceClass::kUnknown, Retryability::kNever);
}

TEST(StripeTable, CardError402IsADecline) {
  const auto o = Capture(Response(402, Error("card_error", "card_declined", "generic_decline")));
  ExpectClass(o, OutcomeKind::kDeclined, EvidenceClass::kDeclined, Retryability::kDefinitive);
  EXPECT_EQ(o.decline_code, "generic_decline");
  EXPECT_EQ(Capture(Response(402, Error("card_error", "authentication_required"))).decline_code,
            "authentication_required");
}

TEST(StripeTable, A402WithoutACodeIsUntrusted) {
  ExpectClass(Capture(Response(402, R"({"error":{"type":"card_error"}})")), OutcomeKind::kUntrustedResponse,
              EvidenceClass::kUnknown, Retryability::kTransient);
}

TEST(StripeTable, ProcessingIsInFlight) {
  ExpectClass(Capture(Response(200, Intent("processing"))), OutcomeKind::kInFlight, EvidenceClass::kUnknown,
              Retryability::kTransient);
}

TEST(StripeTable, StatesWeNeverLeaveAPaymentIntentInAreForAPerson) {
  for (const auto* status : {"requires_action", "requires_confirmation", "requires_capture", "canceled"}) {
    SCOPED_TRACE(status);
    const auto o = Lookup(Response(200, Search({Intent(status)})));
    ExpectClass(o, OutcomeKind::kContractError, EvidenceClass::kUnknown, Retryability::kNever);
    EXPECT_NE(o.detail.find(status), std::string::npos) << o.detail;
  }
}

TEST(StripeTable, AnUnreadablePaymentIntentIsUntrusted) {
  ExpectClass(Capture(Response(200, R"({"id":"pi_1","status":"succeeded"})")), OutcomeKind::kUntrustedResponse,
              EvidenceClass::kUnknown, Retryability::kTransient);
  ExpectClass(Lookup(Response(200, Search({R"({"id":"pi_1"})"}))), OutcomeKind::kUntrustedResponse,
              EvidenceClass::kUnknown, Retryability::kTransient);
  ExpectClass(Capture(Response(200, "not json")), OutcomeKind::kUntrustedResponse, EvidenceClass::kUnknown,
              Retryability::kTransient);
}

// ---- Stripe's errors -----------------------------------------------------------------------------------

TEST(StripeTable, IdempotencyErrorIsForAPersonNeverRetried) {
  const auto o = Capture(Response(400, Error("idempotency_error")));
  ExpectClass(o, OutcomeKind::kContractError, EvidenceClass::kUnknown, Retryability::kNever);
  EXPECT_NE(o.detail.find("idempotency_error"), std::string::npos) << o.detail;
}

TEST(StripeTable, KeyInUseIsInFlightAndRetried) {
  ExpectClass(Capture(Response(409, Error("invalid_request_error", "idempotency_key_in_use"))), OutcomeKind::kInFlight,
              EvidenceClass::kUnknown, Retryability::kTransient);
}

TEST(StripeTable, RateLimitIsThrottledAndRetried) {
  const auto o = Lookup(Response(429, Error("invalid_request_error", "rate_limit"), {{"Retry-After", "2"}}));
  ExpectClass(o, OutcomeKind::kThrottled, EvidenceClass::kUnknown, Retryability::kTransient);
  EXPECT_EQ(o.retry_after, std::chrono::seconds{2});
}

TEST(StripeTable, AStored500ReplayedIsUnknownNeverDeclinedNeverRetried) {
  const auto o = Capture(Response(500, Error("api_error"), {{"Idempotent-Replayed", "true"}}));
  ExpectClass(o, OutcomeKind::kStoredError, EvidenceClass::kUnknown, Retryability::kNever);
}

TEST(StripeTable, ACreatesFirst500IsStoredToo) {
  ExpectClass(Capture(Response(500, Error("api_error"))), OutcomeKind::kStoredError, EvidenceClass::kUnknown,
              Retryability::kNever);
}

TEST(StripeTable, A500StripeSaysToRetryIsRetried) {
  ExpectClass(Capture(Response(500, Error("api_error"), {{"Stripe-Should-Retry", "true"}})), OutcomeKind::kServerError,
              EvidenceClass::kUnknown, Retryability::kTransient);
}

TEST(StripeTable, AReads500StoresNothingAndIsRetried) {
  ExpectClass(Lookup(Response(500, Error("api_error"))), OutcomeKind::kServerError, EvidenceClass::kUnknown,
              Retryability::kTransient);
}

TEST(StripeTable, AProxys5xxIsRetried) {
  ExpectClass(Capture(Response(502, "<html>bad gateway</html>")), OutcomeKind::kServerError, EvidenceClass::kUnknown,
              Retryability::kTransient);
  ExpectClass(Capture(Response(503, "")), OutcomeKind::kUnavailable, EvidenceClass::kUnknown, Retryability::kTransient);
}

TEST(StripeTable, RequestErrorsAreContractErrors) {
  for (const int status : {400, 401, 403, 404}) {
    SCOPED_TRACE(status);
    ExpectClass(Capture(Response(status, Error("invalid_request_error", "parameter_unknown"))),
                OutcomeKind::kContractError, EvidenceClass::kUnknown, Retryability::kNever);
  }
}

TEST(StripeTable, TransportFailuresReadAsOurs) {
  TransportResult refused;
  refused.status = TransportStatus::kConnectRefused;
  ExpectClass(Capture(refused), OutcomeKind::kNotSent, EvidenceClass::kNotSent, Retryability::kTransient);
  TransportResult dropped;
  dropped.status = TransportStatus::kConnectionDropped;
  ExpectClass(Capture(dropped), OutcomeKind::kConnectionDropped, EvidenceClass::kUnknown, Retryability::kTransient);
}

TEST(StripeTable, NothingStripeSendsOutsideItsVocabularyReachesTheDetail) {
  // An acquirer may echo request fields (a card token) in any string: the detail names only Stripe's words.
  const std::string token = "pm_card_4242_secret";
  for (const auto& o : {Capture(Response(400, Error(token, token))), Capture(Response(429, Error("x", token))),
                        Capture(Response(200, Intent(token))),
                        ClassifyStripeRefund(Response(200, R"({"id":"re_1","status":")" + token + R"("})"), kNow)}) {
    EXPECT_EQ(o.detail.find(token), std::string::npos) << o.detail;
    EXPECT_NE(o.detail.find("(unrecognised)"), std::string::npos) << o.detail;
  }
}

// ---- search ---------------------------------------------------------------------------------------------

TEST(StripeTable, ASearchThatFindsNothingIsNotFoundWhichProvesNothing) {
  ExpectClass(Lookup(Response(200, Search({}))), OutcomeKind::kNotFound, EvidenceClass::kUnknown,
              Retryability::kDefinitive);
}

TEST(StripeTable, ASearchWithoutDataIsUntrusted) {
  ExpectClass(Lookup(Response(200, R"({"object":"search_result"})")), OutcomeKind::kUntrustedResponse,
              EvidenceClass::kUnknown, Retryability::kTransient);
}

TEST(StripeTable, RetrieveReadsThePaymentIntentAsItIsNow) {
  const auto o = ClassifyStripeRetrieve(Response(200, Intent("succeeded", Charge(false))), kLookup, kNow);
  ExpectClass(o, OutcomeKind::kCaptured, EvidenceClass::kApproved, Retryability::kDefinitive);
}

// ---- events ---------------------------------------------------------------------------------------------

std::string Event(std::string_view id, std::string_view key, std::string_view intent_id = "pi_9") {
  return std::string(R"({"id":")") + std::string(id) + R"(","object":"event","type":"payment_intent.succeeded",)" +
         R"("created":1796558400,"data":{"object":{"id":")" + std::string(intent_id) +
         R"(","object":"payment_intent"}},"request":{"id":"req_1","idempotency_key":)" +
         (key.empty() ? std::string("null") : '"' + std::string(key) + '"') + "}}";
}

TEST(StripeTable, AnEventCausedByOurKeyNamesItsPaymentIntent) {
  const auto page = ClassifyStripeEventsPage(
      Response(200, R"({"object":"list","data":[)" + Event("evt_1", "other") + "," + Event("evt_2", "m_1:key-1") +
                        "," + Event("evt_3", "") + R"(],"has_more":true})"),
      "m_1:key-1", kNow);
  EXPECT_EQ(page.outcome.kind, OutcomeKind::kPage) << page.outcome.detail;
  EXPECT_EQ(page.payment_intent_id, "pi_9");
  EXPECT_EQ(page.next_cursor, "evt_3");
}

TEST(StripeTable, EventsWithoutOurKeyNameNothingAndTheLastPageHasNoCursor) {
  const auto page = ClassifyStripeEventsPage(
      Response(200, R"({"object":"list","data":[)" + Event("evt_1", "other") + R"(],"has_more":false})"), "m_1:key-1",
      kNow);
  EXPECT_EQ(page.outcome.kind, OutcomeKind::kPage);
  EXPECT_FALSE(page.payment_intent_id.has_value());
  EXPECT_FALSE(page.next_cursor.has_value());
}

TEST(StripeTable, AnEventsFailureSaysWhy) {
  const auto page = ClassifyStripeEventsPage(Response(429, Error("invalid_request_error", "rate_limit")), "k", kNow);
  EXPECT_EQ(page.outcome.kind, OutcomeKind::kThrottled);
}

// ---- refunds (our void) ---------------------------------------------------------------------------------

TEST(StripeTable, ASucceededOrPendingRefundIsAVoid) {
  for (const auto* status : {"succeeded", "pending"}) {
    SCOPED_TRACE(status);
    ExpectClass(ClassifyStripeRefund(Response(200, std::string(R"({"id":"re_1","object":"refund","status":")") +
                                                       status + R"("})"),
                                     kNow),
                OutcomeKind::kVoided, EvidenceClass::kApproved, Retryability::kDefinitive);
  }
}

TEST(StripeTable, AFailedOrCanceledRefundIsForAPerson) {
  for (const auto* status : {"failed", "canceled", "requires_action"}) {
    SCOPED_TRACE(status);
    ExpectClass(ClassifyStripeRefund(Response(200, std::string(R"({"id":"re_1","status":")") + status + R"("})"),
                                     kNow),
                OutcomeKind::kContractError, EvidenceClass::kUnknown, Retryability::kNever);
  }
}

TEST(StripeTable, AlreadyRefundedIsAVoid) {
  ExpectClass(ClassifyStripeRefund(Response(400, Error("invalid_request_error", "charge_already_refunded")), kNow),
              OutcomeKind::kVoided, EvidenceClass::kApproved, Retryability::kDefinitive);
}

TEST(StripeTable, ARefundsStored500IsUnknownNeverRetried) {
  ExpectClass(ClassifyStripeRefund(Response(500, Error("api_error"), {{"Idempotent-Replayed", "true"}}), kNow),
              OutcomeKind::kStoredError, EvidenceClass::kUnknown, Retryability::kNever);
}

// ---- listing ----------------------------------------------------------------------------------------------

TEST(StripeTable, AListingKeepsSucceededPaymentIntentsAndPagesByTheLastId) {
  const auto body = R"({"object":"list","data":[)" + Intent("succeeded", Charge(true), 100, "ch_a", "pi_3") + "," +
                    Intent("requires_payment_method", "", 100, "ch_b", "pi_2") + "," +
                    Intent("succeeded", "", 100, "ch_c", "pi_1") + R"(],"has_more":true})";
  const auto o = ClassifyStripeListPage(Response(200, body), kNow);
  ASSERT_EQ(o.kind, OutcomeKind::kPage) << o.detail;
  ASSERT_EQ(o.page.size(), 2u);
  EXPECT_EQ(o.page[0].id, "pi_3");
  EXPECT_EQ(o.page[0].status, CaptureStatus::kVoided);
  EXPECT_EQ(o.page[1].reference, "ch_c");
  EXPECT_EQ(o.next_page_token, "pi_1");  // the last listed, declined ones included
}

TEST(StripeTable, TheLastPageOfAListingHasNoToken) {
  const auto o = ClassifyStripeListPage(Response(200, R"({"object":"list","data":[],"has_more":false})"), kNow);
  EXPECT_EQ(o.kind, OutcomeKind::kPage);
  EXPECT_FALSE(o.next_page_token.has_value());
}

TEST(StripeTable, AListingWithOneUnreadableEntryIsUntrusted) {
  const auto body = R"({"object":"list","data":[)" + Intent("succeeded") + R"(,{"id":"pi_x"}],"has_more":false})";
  EXPECT_EQ(ClassifyStripeListPage(Response(200, body), kNow).kind, OutcomeKind::kUntrustedResponse);
}

}  // namespace
}  // namespace charge_outbox::acquirer
