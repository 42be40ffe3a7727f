// The classifier over transport results: what each failure and each answer proves, and whether it may
// be retried. No sockets: every case is a TransportResult built by hand.
#include "charge_outbox/acquirer/classifier.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "printers.hpp"

namespace charge_outbox::acquirer {
namespace {

using std::chrono::seconds;
using std::chrono::system_clock;

// 2024-03-10T12:00:00Z, a Sunday.
const system_clock::time_point kNow = std::chrono::sys_days{std::chrono::year{2024} / 3 / 10} + std::chrono::hours{12};

const CaptureRequest kSent{"merchant-1:key-1", 25000, "BRL", "ch_123", "pm_tok_visa"};

constexpr const char* kCaptureBody =
    R"({"id":"cap_1","status":"captured","amount":25000,"currency":"BRL","reference":"ch_123",)"
    R"("created_at":"2024-03-10T11:59:59.123Z"})";

TransportResult Failed(TransportStatus status, bool reused = false) {
  TransportResult r;
  r.status = status;
  r.reused_connection = reused;
  r.detail = "system says no";
  return r;
}

TransportResult Response(int status, std::string body = "",
                         std::vector<std::pair<std::string, std::string>> headers = {}) {
  TransportResult r;
  r.status = TransportStatus::kResponse;
  r.response = HttpResponse{status, std::move(headers), std::move(body)};
  return r;
}

AttemptOutcome Capture(const TransportResult& r) { return ClassifyCapture(r, kSent, kNow); }
AttemptOutcome Lookup(const TransportResult& r, std::optional<ExpectedCapture> expect = std::nullopt) {
  return ClassifyLookup(r, LookupRequest{"merchant-1:key-1", std::move(expect)}, kNow);
}

void ExpectClass(const AttemptOutcome& o, OutcomeKind kind, EvidenceClass evidence, Retryability retry) {
  EXPECT_EQ(o.kind, kind) << ToString(o.kind) << " " << o.detail;
  EXPECT_EQ(o.evidence(), evidence) << ToString(o.evidence());
  EXPECT_EQ(o.retryability(), retry) << ToString(o.retryability());
}

// ---- failures before a response ----------------------------------------------------------------------

TEST(ClassifyTransport, ConnectRefusedIsNotSentAndTransient) {
  const auto o = Capture(Failed(TransportStatus::kConnectRefused));
  ExpectClass(o, OutcomeKind::kNotSent, EvidenceClass::kNotSent, Retryability::kTransient);
  EXPECT_EQ(o.transport, TransportStatus::kConnectRefused);
  EXPECT_FALSE(o.http_status.has_value());
  EXPECT_THAT(o.detail, ::testing::HasSubstr("connect_refused"));
}

TEST(ClassifyTransport, DnsFailureIsNotSent) {
  ExpectClass(Capture(Failed(TransportStatus::kResolveFailed)), OutcomeKind::kNotSent, EvidenceClass::kNotSent,
              Retryability::kTransient);
  ExpectClass(Capture(Failed(TransportStatus::kResolveTimedOut)), OutcomeKind::kNotSent, EvidenceClass::kNotSent,
              Retryability::kTransient);
}

TEST(ClassifyTransport, EveryFailureBeforeTheFirstByteIsNotSent) {
  for (const auto status : {TransportStatus::kConnectTimedOut, TransportStatus::kConnectFailed,
                            TransportStatus::kTlsFailed, TransportStatus::kPoolTimedOut}) {
    ExpectClass(Capture(Failed(status)), OutcomeKind::kNotSent, EvidenceClass::kNotSent, Retryability::kTransient);
  }
}

TEST(ClassifyTransport, ReadTimeoutAfterWriteIsUnknown) {
  ExpectClass(Capture(Failed(TransportStatus::kResponseTimedOut)), OutcomeKind::kTimedOut, EvidenceClass::kUnknown,
              Retryability::kTransient);
  ExpectClass(Capture(Failed(TransportStatus::kSendTimedOut)), OutcomeKind::kTimedOut, EvidenceClass::kUnknown,
              Retryability::kTransient);
}

TEST(ClassifyTransport, DroppedConnectionIsUnknown) {
  ExpectClass(Capture(Failed(TransportStatus::kConnectionDropped)), OutcomeKind::kConnectionDropped,
              EvidenceClass::kUnknown, Retryability::kTransient);
}

TEST(ClassifyTransport, DeadPooledConnectionOnWriteIsUnknownNotNotSent) {
  const auto o = Capture(Failed(TransportStatus::kWriteFailed, /*reused=*/true));
  ExpectClass(o, OutcomeKind::kConnectionDropped, EvidenceClass::kUnknown, Retryability::kTransient);
  EXPECT_TRUE(o.reused_connection);
}

TEST(ClassifyTransport, MalformedResponseIsUntrusted) {
  ExpectClass(Capture(Failed(TransportStatus::kResponseMalformed)), OutcomeKind::kUntrustedResponse,
              EvidenceClass::kUnknown, Retryability::kTransient);
}

TEST(ClassifyTransport, SameFailuresMeanTheSameForEveryOperation) {
  const auto refused = Failed(TransportStatus::kConnectRefused);
  EXPECT_EQ(Lookup(refused).kind, OutcomeKind::kNotSent);
  EXPECT_EQ(ClassifyVoid(refused, kNow).kind, OutcomeKind::kNotSent);
  EXPECT_EQ(ClassifyListPage(refused, kNow).kind, OutcomeKind::kNotSent);
  const auto timeout = Failed(TransportStatus::kResponseTimedOut);
  EXPECT_EQ(ClassifyVoid(timeout, kNow).evidence(), EvidenceClass::kUnknown);
  EXPECT_EQ(ClassifyVoid(timeout, kNow).operation, Operation::kVoid);
}

// ---- capture responses ---------------------------------------------------------------------------

TEST(ClassifyCapture, CreatedWithOurCaptureIsApproved) {
  const auto o = Capture(Response(201, kCaptureBody));
  ExpectClass(o, OutcomeKind::kCaptured, EvidenceClass::kApproved, Retryability::kDefinitive);
  ASSERT_TRUE(o.capture.has_value());
  EXPECT_EQ(o.capture->id, "cap_1");
  EXPECT_EQ(o.capture->amount, 25000);
  EXPECT_EQ(o.capture->currency, "BRL");
  EXPECT_EQ(o.capture->reference, "ch_123");
  EXPECT_EQ(o.capture->created_at, "2024-03-10T11:59:59.123Z");
  EXPECT_EQ(o.http_status, 201);
}

TEST(ClassifyCapture, CreatedWithABodyWeCannotParseIsUnknownNeverApproved) {
  for (const std::string& body : {
           std::string("not json"),
           std::string(""),
           std::string(R"({"id":"cap_1","status":"captured"})"),  // amount, currency, reference missing
           std::string(R"({"id":"cap_1","status":"captured","amount":"25000","currency":"BRL",)"
                       R"("reference":"ch_123","created_at":"x"})"),  // amount as a string
           std::string(R"({"id":"cap_1","status":"pending","amount":25000,"currency":"BRL",)"
                       R"("reference":"ch_123","created_at":"x"})"),  // not a capture status
           std::string(R"([1,2,3])"),
       }) {
    const auto o = Capture(Response(201, body));
    ExpectClass(o, OutcomeKind::kUntrustedResponse, EvidenceClass::kUnknown, Retryability::kTransient);
    EXPECT_FALSE(o.capture.has_value()) << body;
  }
}

TEST(ClassifyCapture, BodiesDeeperOrLargerThanTheLimitsAreNotParsed) {
  std::string deep;
  for (std::size_t i = 0; i < kMaxJsonDepth + 1; ++i) deep += "[";
  for (std::size_t i = 0; i < kMaxJsonDepth + 1; ++i) deep += "]";
  EXPECT_EQ(Capture(Response(201, deep)).kind, OutcomeKind::kUntrustedResponse);

  std::string large = kCaptureBody;
  large.insert(large.size() - 1, R"(,"padding":")" + std::string(kMaxJsonBodyBytes, 'x') + "\"");
  EXPECT_EQ(Capture(Response(201, large)).kind, OutcomeKind::kUntrustedResponse);
  EXPECT_FALSE(ParseCaptureJson(large).has_value());
  EXPECT_TRUE(ParseCaptureJson(kCaptureBody).has_value());
}

TEST(ClassifyCapture, ACaptureThatIsNotOursIsAMismatchNeverRetried) {
  const std::string other_amount =
      R"({"id":"cap_1","status":"captured","amount":99,"currency":"BRL","reference":"ch_123","created_at":"x"})";
  const auto o = Capture(Response(201, other_amount));
  ExpectClass(o, OutcomeKind::kMismatch, EvidenceClass::kUnknown, Retryability::kNever);
  ASSERT_TRUE(o.capture.has_value());
  EXPECT_EQ(o.capture->amount, 99);
  const std::string other_reference =
      R"({"id":"cap_1","status":"captured","amount":25000,"currency":"BRL","reference":"ch_9","created_at":"x"})";
  EXPECT_EQ(Capture(Response(201, other_reference)).kind, OutcomeKind::kMismatch);
}

TEST(ClassifyCapture, DeclineWithCodeIsDeclinedAndFinal) {
  const auto o = Capture(Response(402, R"({"status":"declined","decline_code":"insufficient_funds"})"));
  ExpectClass(o, OutcomeKind::kDeclined, EvidenceClass::kDeclined, Retryability::kDefinitive);
  EXPECT_EQ(o.decline_code, "insufficient_funds");
}

TEST(ClassifyCapture, PaymentRequiredWithoutADeclineCodeIsNotADecline) {
  ExpectClass(Capture(Response(402, R"({"status":"declined"})")), OutcomeKind::kUntrustedResponse,
              EvidenceClass::kUnknown, Retryability::kTransient);
  EXPECT_EQ(Capture(Response(402, "<html>")).kind, OutcomeKind::kUntrustedResponse);
}

TEST(ClassifyCapture, ThrottledWithRetryAfterSeconds) {
  const auto o = Capture(Response(429, "", {{"Retry-After", "7"}}));
  ExpectClass(o, OutcomeKind::kThrottled, EvidenceClass::kUnknown, Retryability::kTransient);
  EXPECT_EQ(o.retry_after, seconds{7});
}

TEST(ClassifyCapture, ThrottledWithRetryAfterHttpDate) {
  const auto o = Capture(Response(429, "", {{"retry-after", "Sun, 10 Mar 2024 12:00:30 GMT"}}));
  EXPECT_EQ(o.kind, OutcomeKind::kThrottled);
  EXPECT_EQ(o.retry_after, seconds{30});
}

TEST(ClassifyCapture, UnavailableIsUnknownAndCarriesRetryAfter) {
  const auto o = Capture(Response(503, "", {{"Retry-After", "2"}}));
  ExpectClass(o, OutcomeKind::kUnavailable, EvidenceClass::kUnknown, Retryability::kTransient);
  EXPECT_EQ(o.retry_after, seconds{2});
  EXPECT_EQ(o.http_status, 503);
}

TEST(ClassifyCapture, ServerErrorsAreUnknown) {
  for (const int status : {500, 502, 504, 599}) {
    const auto o = Capture(Response(status, R"({"status":"captured"})"));
    ExpectClass(o, OutcomeKind::kServerError, EvidenceClass::kUnknown, Retryability::kTransient);
    EXPECT_FALSE(o.retry_after.has_value());
  }
}

TEST(ClassifyCapture, InFlightIsUnknownAndTransient) {
  const auto o = Capture(Response(409, "", {{"Retry-After", "1"}}));
  ExpectClass(o, OutcomeKind::kInFlight, EvidenceClass::kUnknown, Retryability::kTransient);
  EXPECT_EQ(o.retry_after, seconds{1});
}

TEST(ClassifyCapture, SameKeyOtherBodyIsAContractErrorNeverRetried) {
  ExpectClass(Capture(Response(422, R"({"error":"idempotency_key_reused"})")), OutcomeKind::kContractError,
              EvidenceClass::kUnknown, Retryability::kNever);
}

TEST(ClassifyCapture, ClientErrorsAreContractErrors) {
  for (const int status : {400, 401, 403, 404, 405, 413, 415}) {
    ExpectClass(Capture(Response(status)), OutcomeKind::kContractError, EvidenceClass::kUnknown,
                Retryability::kNever);
  }
}

TEST(ClassifyCapture, StatusesOutsideTheContract) {
  EXPECT_EQ(Capture(Response(302)).kind, OutcomeKind::kContractError);
  EXPECT_EQ(Capture(Response(100)).kind, OutcomeKind::kContractError);
  // 202 or 204 do not say the capture happened: unknown, and asking again with the key is safe.
  EXPECT_EQ(Capture(Response(202, kCaptureBody)).kind, OutcomeKind::kUntrustedResponse);
  EXPECT_EQ(Capture(Response(408)).kind, OutcomeKind::kTimedOut);
  // A 200 carrying our capture is the same evidence as the 201 the contract names.
  EXPECT_EQ(Capture(Response(200, kCaptureBody)).kind, OutcomeKind::kCaptured);
}

// ---- lookup, void, list ------------------------------------------------------------------------------

TEST(ClassifyLookup, NotFoundIsALegitimateAnswerNotAContractError) {
  const auto o = Lookup(Response(404, R"({"error":"not_found"})"));
  ExpectClass(o, OutcomeKind::kNotFound, EvidenceClass::kUnknown, Retryability::kDefinitive);
}

TEST(ClassifyLookup, FoundCapture) {
  const auto o = Lookup(Response(200, kCaptureBody), ExpectedCapture{25000, "BRL", "ch_123"});
  ExpectClass(o, OutcomeKind::kCaptured, EvidenceClass::kApproved, Retryability::kDefinitive);
  EXPECT_EQ(o.capture->id, "cap_1");
}

TEST(ClassifyLookup, FoundCaptureThatDiffersFromTheChargeIsAMismatch) {
  EXPECT_EQ(Lookup(Response(200, kCaptureBody), ExpectedCapture{25000, "USD", "ch_123"}).kind,
            OutcomeKind::kMismatch);
  EXPECT_EQ(Lookup(Response(200, kCaptureBody)).kind, OutcomeKind::kCaptured);  // nothing expected
}

TEST(ClassifyLookup, OtherStatuses) {
  EXPECT_EQ(Lookup(Response(401)).kind, OutcomeKind::kContractError);
  EXPECT_EQ(Lookup(Response(429, "", {{"Retry-After", "3"}})).kind, OutcomeKind::kThrottled);
  EXPECT_EQ(Lookup(Response(200, "{}")).kind, OutcomeKind::kUntrustedResponse);
}

TEST(ClassifyVoid, VoidedAndNot) {
  ExpectClass(ClassifyVoid(Response(200, R"({"status":"voided","id":"cap_1"})"), kNow), OutcomeKind::kVoided,
              EvidenceClass::kApproved, Retryability::kDefinitive);
  EXPECT_EQ(ClassifyVoid(Response(200, R"({"status":"captured"})"), kNow).kind, OutcomeKind::kUntrustedResponse);
  EXPECT_EQ(ClassifyVoid(Response(404), kNow).kind, OutcomeKind::kContractError);
  EXPECT_EQ(ClassifyVoid(Response(402, R"({"decline_code":"x"})"), kNow).kind, OutcomeKind::kContractError);
}

TEST(ClassifyListPage, PageWithAndWithoutNextToken) {
  const std::string more = std::string(R"({"data":[)") + kCaptureBody + R"(],"next_page_token":"p2"})";
  const auto first = ClassifyListPage(Response(200, more), kNow);
  ExpectClass(first, OutcomeKind::kPage, EvidenceClass::kApproved, Retryability::kDefinitive);
  ASSERT_EQ(first.page.size(), 1u);
  EXPECT_EQ(first.page[0].id, "cap_1");
  EXPECT_EQ(first.next_page_token, "p2");

  const auto last = ClassifyListPage(Response(200, R"({"data":[],"next_page_token":null})"), kNow);
  EXPECT_EQ(last.kind, OutcomeKind::kPage);
  EXPECT_FALSE(last.next_page_token.has_value());
  EXPECT_FALSE(ClassifyListPage(Response(200, R"({"data":[]})"), kNow).next_page_token.has_value());
}

TEST(ClassifyListPage, OneBadEntryMakesThePageUntrusted) {
  const std::string body = std::string(R"({"data":[)") + kCaptureBody + R"(,{"id":"cap_2"}]})";
  EXPECT_EQ(ClassifyListPage(Response(200, body), kNow).kind, OutcomeKind::kUntrustedResponse);
  EXPECT_EQ(ClassifyListPage(Response(200, R"({"data":{}})"), kNow).kind, OutcomeKind::kUntrustedResponse);
  EXPECT_EQ(ClassifyListPage(Response(200, R"({"data":[],"next_page_token":7})"), kNow).kind,
            OutcomeKind::kUntrustedResponse);
  EXPECT_EQ(ClassifyListPage(Response(404), kNow).kind, OutcomeKind::kContractError);
}

// ---- Retry-After and HTTP-date -------------------------------------------------------------------------

TEST(ParseRetryAfter, DeltaSeconds) {
  EXPECT_EQ(ParseRetryAfter("0", kNow), seconds{0});
  EXPECT_EQ(ParseRetryAfter("120", kNow), seconds{120});
  EXPECT_EQ(ParseRetryAfter("  5 ", kNow), seconds{5});
  EXPECT_EQ(ParseRetryAfter("99999999999999999999999", kNow), kMaxRetryAfter);
  EXPECT_EQ(ParseRetryAfter("90000", kNow), kMaxRetryAfter);
}

TEST(ParseRetryAfter, HttpDateInAllThreeFormats) {
  EXPECT_EQ(ParseRetryAfter("Sun, 10 Mar 2024 12:01:00 GMT", kNow), seconds{60});
  EXPECT_EQ(ParseRetryAfter("Sunday, 10-Mar-24 12:01:00 GMT", kNow), seconds{60});
  EXPECT_EQ(ParseRetryAfter("Sun Mar 10 12:01:00 2024", kNow), seconds{60});
  EXPECT_EQ(ParseRetryAfter("Fri Mar  1 12:00:00 2024", kNow), seconds{0});  // in the past
}

TEST(ParseRetryAfter, DatesInThePastAreZeroAndFarFutureIsClamped) {
  EXPECT_EQ(ParseRetryAfter("Sun, 06 Nov 1994 08:49:37 GMT", kNow), seconds{0});
  EXPECT_EQ(ParseRetryAfter("Mon, 10 Mar 2025 12:00:00 GMT", kNow), kMaxRetryAfter);
}

// Found by fuzz/ (acquirer_classifier): a four-digit year beyond the clock's range (1678 to 2261, it counts
// nanoseconds) overflowed, so "never" (year 9999) could read as "now" and a date in year 1026 as some
// day ahead. Each is as far as it says: the longest wait, or none.
TEST(ParseRetryAfter, YearsBeyondTheClocksRangeAreFarFutureOrPast) {
  for (const char* value : {"Fri, 31 Dec 9999 23:59:59 GMT", "Fri Dec 31 23:59:59 9999", "Thu, 01 Jan 2262 00:00:00 GMT"}) {
    EXPECT_EQ(ParseRetryAfter(value, kNow), kMaxRetryAfter) << value;
  }
  for (const char* value : {"Tue Dec  1 00:02:00 1026", "Mon, 01 Jan 0001 00:00:00 GMT", "Fri, 31 Dec 1677 00:00:00 GMT"}) {
    EXPECT_EQ(ParseRetryAfter(value, kNow), seconds{0}) << value;
  }
  const auto never = ParseHttpDate("Fri, 31 Dec 9999 23:59:59 GMT", kNow);
  ASSERT_TRUE(never.has_value());
  EXPECT_GT(*never, kNow);
}

TEST(ParseRetryAfter, GarbageIsIgnored) {
  for (const char* value : {"", "soon", "-1", "1.5", "10s", "Sun, 10 Mar 2024 12:01:00 UTC",
                            "Sun, 30 Feb 2024 12:00:00 GMT", "Sun, 10 Mar 2024 25:00:00 GMT"}) {
    EXPECT_FALSE(ParseRetryAfter(value, kNow).has_value()) << value;
  }
}

TEST(ParseHttpDate, Rfc850TwoDigitYearsAreNeverFiftyYearsAhead) {
  const auto date = ParseHttpDate("Sunday, 06-Nov-94 08:49:37 GMT", kNow);
  ASSERT_TRUE(date.has_value());
  EXPECT_EQ(*date, std::chrono::sys_days{std::chrono::year{1994} / 11 / 6} + std::chrono::hours{8} +
                       std::chrono::minutes{49} + std::chrono::seconds{37});
  const auto soon = ParseHttpDate("Monday, 01-Jan-35 00:00:00 GMT", kNow);
  ASSERT_TRUE(soon.has_value());
  EXPECT_EQ(std::chrono::year_month_day{std::chrono::floor<std::chrono::days>(*soon)}.year(), std::chrono::year{2035});
}

TEST(HttpResponse, HeaderNamesAreCaseInsensitive) {
  HttpResponse r{200, {{"Content-Type", "application/json"}, {"RETRY-AFTER", "3"}}, ""};
  EXPECT_EQ(r.Header("content-type"), "application/json");
  EXPECT_EQ(r.Header("retry-after"), "3");
  EXPECT_FALSE(r.Header("x-missing").has_value());
}

// ---- names ---------------------------------------------------------------------------------------------

TEST(OutcomeNames, AreDistinctAndMatchTheDatabaseEnum) {
  std::set<std::string_view> names;
  for (int k = 0; k <= static_cast<int>(OutcomeKind::kContractError); ++k) {
    EXPECT_TRUE(names.insert(ToString(static_cast<OutcomeKind>(k))).second);
  }
  EXPECT_EQ(ToString(EvidenceClass::kNotSent), "not_sent");
  EXPECT_EQ(ToString(EvidenceClass::kUnknown), "unknown");
  EXPECT_EQ(ToString(EvidenceClass::kDeclined), "declined");
  EXPECT_EQ(ToString(EvidenceClass::kApproved), "approved");
  EXPECT_EQ(ToString(Operation::kCapture), "capture");
  EXPECT_EQ(ToString(Operation::kLookup), "lookup");
  EXPECT_EQ(ToString(Operation::kVoid), "void");
}

TEST(OutcomeDetail, NeverCarriesTheResponseBodyOrThePaymentMethod) {
  const auto o = Capture(Response(400, R"({"error":"bad payment_method pm_tok_visa"})"));
  EXPECT_THAT(o.detail, ::testing::Not(::testing::HasSubstr("pm_tok_visa")));
  EXPECT_THAT(o.detail, ::testing::HasSubstr("HTTP 400"));
}

}  // namespace
}  // namespace charge_outbox::acquirer
