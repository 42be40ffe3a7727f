// The acquirer response classifier on raw response bytes: Beast's response parser with the HTTP
// client's limits (common/src/acquirer/http_acquirer_client.cpp), the response handed over as the client
// hands it, then every classifier (capture, lookup with and without an expected capture, void, list
// page) and the Retry-After and capture parsers. The promises checked are the money-safety ones: a
// capture is only "captured" when it is the one we asked for, a decline carries its code, a back-off is
// bounded, and no outcome's log line carries what the acquirer sent back (it may echo a card token).
// The Stripe adapter's table (stripe_classifier.hpp) reads the same bytes under the same promises; a Stripe
// decline may also come as a 200 PaymentIntent whose payment failed.
#include <boost/beast/http/string_body.hpp>

#include <chrono>
#include <string>

#include "charge_outbox/acquirer/classifier.hpp"
#include "charge_outbox/acquirer/stripe_classifier.hpp"
#include "fuzz_check.hpp"

namespace {

namespace bhttp = boost::beast::http;
using namespace charge_outbox::acquirer;

constexpr std::size_t kMaxResponseHeaderBytes = 16 * 1024;  // as the client sets it
constexpr std::size_t kMaxResponseBytes = 1024 * 1024;      // acquirer.max_response_bytes' default
constexpr std::string_view kToken = "tok_fuzz_4242";        // the seeds' bodies echo it

const CaptureRequest kCapture{.idempotency_key = "key-1",
                              .amount = 1500,
                              .currency = "BRL",
                              .reference = "ch_fuzz",
                              .payment_method = std::string(kToken)};
const LookupRequest kLookupExpecting{.idempotency_key = "key-1",
                                     .expect = ExpectedCapture{.amount = 1500, .currency = "BRL", .reference = "ch_fuzz"}};
const LookupRequest kLookupAny{.idempotency_key = "key-1", .expect = std::nullopt};

void CheckCommon(const AttemptOutcome& o, Operation operation, const TransportResult& result) {
  FUZZ_CHECK(o.operation == operation);
  FUZZ_CHECK(o.transport == result.status);
  if (result.response) FUZZ_CHECK(o.http_status == result.response->status);
  if (o.retry_after) FUZZ_CHECK(o.retry_after->count() >= 0 && *o.retry_after <= kMaxRetryAfter);
  FUZZ_CHECK(o.detail.find(kToken) == std::string::npos);
  if (o.kind == OutcomeKind::kDeclined) FUZZ_CHECK(o.decline_code && (o.http_status == 402 || o.http_status == 200));
  // Every outcome has its evidence and retryability (exhaustive switches): they must not throw or trap.
  (void)o.evidence();
  (void)o.retryability();
}

// A lookup's `captured` may carry a voided capture (charges::Evidence reads its status); a capture's
// never does: a voided one is a mismatch there.
void CheckCaptured(const AttemptOutcome& o, const std::optional<ExpectedCapture>& expect) {
  if (o.kind != OutcomeKind::kCaptured) return;
  FUZZ_CHECK(o.capture.has_value());
  if (o.operation == Operation::kCapture) FUZZ_CHECK(o.capture->status == CaptureStatus::kCaptured);
  if (expect) {
    FUZZ_CHECK(o.capture->amount == expect->amount && o.capture->currency == expect->currency &&
               o.capture->reference == expect->reference);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // 2026-12-01T00:00:00Z: a fixed clock, so a finding replays.
  const auto now = std::chrono::system_clock::time_point{std::chrono::seconds{1'796'083'200}};
  bhttp::response_parser<bhttp::string_body> parser;
  parser.header_limit(static_cast<std::uint32_t>(kMaxResponseHeaderBytes));
  parser.body_limit(kMaxResponseBytes);

  TransportResult result;
  if (charge_outbox::fuzz::ParseWhole(parser, charge_outbox::fuzz::Bytes(data, size))) {
    auto message = parser.release();
    HttpResponse response;
    response.status = static_cast<int>(message.result_int());
    for (const auto& field : message) {
      response.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
    }
    response.body = std::move(message.body());
    result.response = std::move(response);
  } else {
    result.status = TransportStatus::kResponseMalformed;
    result.detail = "malformed";
  }

  const auto capture = ClassifyCapture(result, kCapture, now);
  CheckCommon(capture, Operation::kCapture, result);
  CheckCaptured(capture, ExpectedCapture{kCapture.amount, kCapture.currency, kCapture.reference});
  const auto expecting = ClassifyLookup(result, kLookupExpecting, now);
  CheckCommon(expecting, Operation::kLookup, result);
  CheckCaptured(expecting, kLookupExpecting.expect);
  CheckCommon(ClassifyLookup(result, kLookupAny, now), Operation::kLookup, result);
  CheckCommon(ClassifyVoid(result, now), Operation::kVoid, result);
  CheckCommon(ClassifyListPage(result, now), Operation::kList, result);

  const auto stripe_capture = ClassifyStripeCapture(result, kCapture, now);
  CheckCommon(stripe_capture, Operation::kCapture, result);
  CheckCaptured(stripe_capture, ExpectedCapture{kCapture.amount, kCapture.currency, kCapture.reference});
  const auto stripe_search = ClassifyStripeSearch(result, kLookupExpecting, now);
  CheckCommon(stripe_search, Operation::kLookup, result);
  CheckCaptured(stripe_search, kLookupExpecting.expect);
  const auto stripe_retrieve = ClassifyStripeRetrieve(result, kLookupExpecting, now);
  CheckCommon(stripe_retrieve, Operation::kLookup, result);
  CheckCaptured(stripe_retrieve, kLookupExpecting.expect);
  const auto events = ClassifyStripeEventsPage(result, kLookupExpecting.idempotency_key, now);
  CheckCommon(events.outcome, Operation::kLookup, result);
  if (events.payment_intent_id) FUZZ_CHECK(events.outcome.kind == OutcomeKind::kPage);
  CheckCommon(ClassifyStripeRefund(result, now), Operation::kVoid, result);
  const auto stripe_page = ClassifyStripeListPage(result, now);
  CheckCommon(stripe_page, Operation::kList, result);
  // A Stripe 5xx is never a decline, stored or not.
  if (result.response && result.response->status >= 500) FUZZ_CHECK(stripe_capture.kind != OutcomeKind::kDeclined);

  if (result.response) {
    if (const auto retry_after = result.response->Header("Retry-After")) {
      (void)ParseHttpDate(*retry_after, now);
      if (const auto delay = ParseRetryAfter(*retry_after, now)) {
        FUZZ_CHECK(delay->count() >= 0 && *delay <= kMaxRetryAfter);
      }
    }
    (void)ParseCaptureJson(result.response->body);
  }
  return 0;
}
