#include "charge_outbox/acquirer/stripe_classifier.hpp"

#include <boost/json/value.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <variant>
#include <vector>

#include "classify_support.hpp"
#include "http_transport.hpp"

namespace charge_outbox::acquirer {
namespace {

namespace json = boost::json;
using detail::ClassifyTransportFailure;
using detail::Finish;
using detail::NonEmptyString;
using detail::ParseJson;
using detail::PositiveInteger;
using detail::Start;
using std::chrono::system_clock;

std::string Upper(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::toupper(c); });
  return out;
}

// What goes into an outcome's detail (the log line and the attempts table) from Stripe's words: only words
// of Stripe's own vocabulary. Anything else is said to be unrecognised, never repeated: an acquirer may
// echo request fields, a card token among them, in any string it sends back.
std::string_view Known(std::string_view word) {
  static constexpr std::array<std::string_view, 38> kVocabulary = {
      // PaymentIntent and refund statuses
      "requires_payment_method", "requires_confirmation", "requires_action", "processing", "requires_capture",
      "canceled", "succeeded", "pending", "failed",
      // error types
      "api_error", "card_error", "idempotency_error", "invalid_request_error", "rate_limit_error",
      "authentication_error",
      // error codes this adapter may meet
      "rate_limit", "idempotency_key_in_use", "charge_already_refunded", "parameter_unknown", "parameter_missing",
      "parameter_invalid_integer", "parameter_invalid_empty", "parameter_invalid_string_empty", "resource_missing",
      "payment_intent_unexpected_state", "payment_intent_authentication_failure", "card_declined", "expired_card",
      "incorrect_cvc", "processing_error", "authentication_required", "lock_timeout", "api_key_expired",
      "secret_key_required", "testmode_charges_only", "account_invalid", "amount_too_small", "amount_too_large"};
  if (word.empty()) return word;
  return std::find(kVocabulary.begin(), kVocabulary.end(), word) != kVocabulary.end() ? word : "(unrecognised)";
}

bool IsTrue(const std::optional<std::string_view>& header) {
  return header.has_value() && (*header == "true" || *header == "True" || *header == "TRUE");
}

// ---- Stripe's objects --------------------------------------------------------------------------------

// What one PaymentIntent says about the money.
struct Succeeded {};
struct Failed {
  std::string decline_code;
};
struct StillProcessing {};
struct NotOursToFinish {
  std::string status;
};
using IntentState = std::variant<Succeeded, Failed, StillProcessing, NotOursToFinish>;

// A PaymentIntent: what it names (as a Capture: id, amount, currency, our charge id, created; the status is
// meaningful only once it succeeded) and its state.
struct Intent {
  Capture seen;
  IntentState state;
};

std::optional<std::string> ErrorCode(const json::object& error) {
  if (auto code = NonEmptyString(error, "decline_code")) return code;
  return NonEmptyString(error, "code");
}

// Whether the PaymentIntent's latest charge has been refunded in full; it is expanded on every request that
// reads one. Not expanded (an id only): as Stripe answered a create, before any refund of ours.
bool Refunded(const json::object& intent, std::int64_t amount) {
  const auto* charge = intent.if_contains("latest_charge");
  if (charge == nullptr || !charge->is_object()) return false;
  const auto& object = charge->get_object();
  if (const auto* refunded = object.if_contains("refunded"); refunded != nullptr && refunded->is_bool() &&
                                                             refunded->get_bool()) {
    return true;
  }
  const auto refunded_amount = PositiveInteger(object, "amount_refunded");
  return refunded_amount.has_value() && *refunded_amount >= amount;
}

// nullopt: not a PaymentIntent we can read (a field missing or mistyped).
std::optional<Intent> ReadIntent(const json::value& value) {
  const auto* intent = value.if_object();
  if (intent == nullptr) return std::nullopt;
  auto id = NonEmptyString(*intent, "id");
  auto status = NonEmptyString(*intent, "status");
  auto amount = PositiveInteger(*intent, "amount");
  auto currency = NonEmptyString(*intent, "currency");
  const auto* created = intent->if_contains("created");
  if (!id || !status || !amount || !currency || created == nullptr || !created->is_int64()) return std::nullopt;
  // A time no PaymentIntent can have (before 1970, after 2199) is not read as one, nor converted: past
  // 2262 its nanoseconds overflow (the fuzz target's finding).
  if (created->get_int64() < 0 || created->get_int64() > kLatestStripeCreated) return std::nullopt;
  Intent read;
  read.seen.id = std::move(*id);
  read.seen.amount = *amount;
  read.seen.currency = Upper(*currency);
  if (const auto* metadata = intent->if_contains("metadata"); metadata != nullptr && metadata->is_object()) {
    read.seen.reference = NonEmptyString(metadata->get_object(), "charge_id").value_or("");
  }
  read.seen.created_at = StripeCreatedAt(created->get_int64());
  if (*status == "succeeded") {
    read.seen.status = Refunded(*intent, *amount) ? CaptureStatus::kVoided : CaptureStatus::kCaptured;
    read.state = Succeeded{};
  } else if (*status == "requires_payment_method") {
    // With a last_payment_error the confirmation we asked for failed: a decline, in the most precise words
    // Stripe gave (its code is optional; its type is not). Without one, nothing was tried yet.
    const auto* error = intent->if_contains("last_payment_error");
    if (error == nullptr || !error->is_object()) {
      read.state = NotOursToFinish{*status};
    } else {
      auto code = ErrorCode(error->get_object());
      if (!code) code = NonEmptyString(error->get_object(), "type");
      read.state = Failed{code.value_or("payment_failed")};
    }
  } else if (*status == "processing") {
    read.state = StillProcessing{};
  } else {
    read.state = NotOursToFinish{std::move(*status)};
  }
  return read;
}

bool Ours(const Capture& capture, std::int64_t amount, std::string_view currency, std::string_view reference) {
  return capture.amount == amount && capture.currency == Upper(currency) && capture.reference == reference;
}

// One PaymentIntent's state as an outcome. `expect` is what the charge says; `on_voided` is the kind a
// refunded capture takes (a create that finds its key's capture refunded: mismatch, as our classifier says;
// a lookup: captured, voided, which the evidence reading tells apart).
AttemptOutcome FromIntent(AttemptOutcome outcome, Intent intent, const std::optional<ExpectedCapture>& expect,
                          OutcomeKind on_voided) {
  auto& state = intent.state;
  // A decline or a capture is evidence about our charge only if the PaymentIntent is ours; one that names the
  // charge with another amount or currency is a person's to look at, whatever its state.
  const bool settles = std::holds_alternative<Succeeded>(state) || std::holds_alternative<Failed>(state);
  const bool ours = !expect.has_value() || Ours(intent.seen, expect->amount, expect->currency, expect->reference);
  if (settles && !ours) {
    outcome.capture = std::move(intent.seen);
    return Finish(std::move(outcome), OutcomeKind::kMismatch,
                  "PaymentIntent differs in amount, currency or metadata.charge_id");
  }
  if (std::holds_alternative<Succeeded>(state)) {
    outcome.capture = std::move(intent.seen);
    if (outcome.capture->status == CaptureStatus::kVoided) {
      return Finish(std::move(outcome), on_voided, "PaymentIntent succeeded and refunded");
    }
    return Finish(std::move(outcome), OutcomeKind::kCaptured, "");
  }
  if (auto* failed = std::get_if<Failed>(&state)) {
    outcome.decline_code = std::move(failed->decline_code);
    return Finish(std::move(outcome), OutcomeKind::kDeclined, "PaymentIntent requires_payment_method");
  }
  if (std::holds_alternative<StillProcessing>(state)) {
    return Finish(std::move(outcome), OutcomeKind::kInFlight, "PaymentIntent processing");
  }
  // requires_action (with off_session Stripe declines instead), requires_confirmation, requires_capture
  // (we never ask for manual capture), canceled: nothing we sent leaves a PaymentIntent so, and nothing we
  // may do finishes it. A person looks.
  return Finish(std::move(outcome), OutcomeKind::kContractError,
                "PaymentIntent " + std::string(Known(std::get<NotOursToFinish>(state).status)) +
                    ": not captured, and not ours to finish");
}

// ---- Stripe's errors ---------------------------------------------------------------------------------

struct StripeError {
  std::string type;
  std::string code;
};

StripeError ErrorOf(const HttpResponse& response) {
  StripeError out;
  const auto body = ParseJson(response.body);
  const auto* object = body ? body->if_object() : nullptr;
  const auto* error = object ? object->if_contains("error") : nullptr;
  if (error == nullptr || !error->is_object()) return out;
  out.type = NonEmptyString(error->get_object(), "type").value_or("");
  out.code = NonEmptyString(error->get_object(), "code").value_or("");
  return out;
}

// Whether Stripe stored the request's answer under its key: only a POST's (an idempotent request) whose
// endpoint started running.
enum class Stored { kYes, kNo };

// Every status the operation does not read itself.
AttemptOutcome ClassifyStripeStatus(AttemptOutcome outcome, const HttpResponse& response, Stored stored) {
  const int status = response.status;
  const auto error = ErrorOf(response);
  if (status == 429) return Finish(std::move(outcome), OutcomeKind::kThrottled, Known(error.code));
  if (status == 409) return Finish(std::move(outcome), OutcomeKind::kInFlight, "the same key still in flight");
  if (status == 408) return Finish(std::move(outcome), OutcomeKind::kTimedOut, "acquirer timed out");
  if (status == 400 && error.type == "idempotency_error") {
    // Our key already stands for a request with other parameters, which may well have captured.
    return Finish(std::move(outcome), OutcomeKind::kContractError,
                  "idempotency_error: the key was first used with other parameters");
  }
  if (status == 500) {
    // Stripe keeps a 500 under the key once the endpoint started, and replays it; only its own
    // Stripe-Should-Retry: true says a retry may get another answer.
    if (IsTrue(response.Header("Idempotent-Replayed")) ||
        (stored == Stored::kYes && !IsTrue(response.Header("Stripe-Should-Retry")))) {
      return Finish(std::move(outcome), OutcomeKind::kStoredError,
                    "Stripe stored this error under the key: only a lookup can tell what happened");
    }
    return Finish(std::move(outcome), OutcomeKind::kServerError, Known(error.type));
  }
  if (status == 503) return Finish(std::move(outcome), OutcomeKind::kUnavailable, "");
  if (status >= 500 && status <= 599) return Finish(std::move(outcome), OutcomeKind::kServerError, "");
  if (status >= 200 && status <= 299) {
    return Finish(std::move(outcome), OutcomeKind::kUntrustedResponse, "success status outside the contract");
  }
  std::string why(Known(error.type));
  if (!error.code.empty()) why += std::string(why.empty() ? "" : " ") + std::string(Known(error.code));
  return Finish(std::move(outcome), OutcomeKind::kContractError, why);
}

const json::array* DataArray(const json::value& body) {
  const auto* object = body.if_object();
  const auto* data = object ? object->if_contains("data") : nullptr;
  return data != nullptr && data->is_array() ? &data->get_array() : nullptr;
}

bool HasMore(const json::value& body) {
  const auto* more = body.get_object().if_contains("has_more");
  return more != nullptr && more->is_bool() && more->get_bool();
}

}  // namespace

std::string StripeCreatedAt(std::int64_t unix_seconds) {
  const auto seconds = std::clamp<std::int64_t>(unix_seconds, 0, kLatestStripeCreated);
  return detail::Rfc3339Micros(system_clock::time_point{std::chrono::seconds{seconds}});
}

AttemptOutcome ClassifyStripeCapture(const TransportResult& result, const CaptureRequest& sent,
                                     system_clock::time_point now) {
  if (auto failed = ClassifyTransportFailure(Operation::kCapture, result, now)) return std::move(*failed);
  auto outcome = Start(Operation::kCapture, result, now);
  const auto& response = *result.response;
  if (response.status == 200) {
    const auto body = ParseJson(response.body);
    auto intent = body ? ReadIntent(*body) : std::nullopt;
    if (!intent) return Finish(std::move(outcome), OutcomeKind::kUntrustedResponse, "200 without a PaymentIntent");
    const ExpectedCapture expect{sent.amount, sent.currency, sent.reference};
    return FromIntent(std::move(outcome), std::move(*intent), expect, OutcomeKind::kMismatch);
  }
  if (response.status == 402) {
    const auto body = ParseJson(response.body);
    const auto* object = body ? body->if_object() : nullptr;
    const auto* error = object ? object->if_contains("error") : nullptr;
    auto code = error != nullptr && error->is_object() ? ErrorCode(error->get_object()) : std::nullopt;
    if (!code) return Finish(std::move(outcome), OutcomeKind::kUntrustedResponse, "402 without a decline code");
    outcome.decline_code = std::move(code);
    return Finish(std::move(outcome), OutcomeKind::kDeclined, "");
  }
  return ClassifyStripeStatus(std::move(outcome), response, Stored::kYes);
}

AttemptOutcome ClassifyStripeSearch(const TransportResult& result, const LookupRequest& sent,
                                    system_clock::time_point now) {
  if (auto failed = ClassifyTransportFailure(Operation::kLookup, result, now)) return std::move(*failed);
  auto outcome = Start(Operation::kLookup, result, now);
  const auto& response = *result.response;
  if (response.status != 200) return ClassifyStripeStatus(std::move(outcome), response, Stored::kNo);
  const auto body = ParseJson(response.body);
  const auto* data = body ? DataArray(*body) : nullptr;
  if (data == nullptr) return Finish(std::move(outcome), OutcomeKind::kUntrustedResponse, "200 without a data array");
  std::vector<Intent> intents;
  for (const auto& entry : *data) {
    auto intent = ReadIntent(entry);
    if (!intent) return Finish(std::move(outcome), OutcomeKind::kUntrustedResponse, "an unreadable PaymentIntent");
    intents.push_back(std::move(*intent));
  }
  if (intents.empty()) return Finish(std::move(outcome), OutcomeKind::kNotFound, "no PaymentIntent names this charge");
  if (intents.size() > 1) {
    // Which one is "the" payment is a person's call: hand over a succeeded one if there is one.
    outcome.capture = intents.front().seen;
    for (auto& intent : intents) {
      if (std::holds_alternative<Succeeded>(intent.state)) outcome.capture = intent.seen;
    }
    return Finish(std::move(outcome), OutcomeKind::kMismatch,
                  std::to_string(intents.size()) + " PaymentIntents name this charge");
  }
  return FromIntent(std::move(outcome), std::move(intents.front()), sent.expect, OutcomeKind::kCaptured);
}

AttemptOutcome ClassifyStripeRetrieve(const TransportResult& result, const LookupRequest& sent,
                                      system_clock::time_point now) {
  if (auto failed = ClassifyTransportFailure(Operation::kLookup, result, now)) return std::move(*failed);
  auto outcome = Start(Operation::kLookup, result, now);
  const auto& response = *result.response;
  if (response.status != 200) return ClassifyStripeStatus(std::move(outcome), response, Stored::kNo);
  const auto body = ParseJson(response.body);
  auto intent = body ? ReadIntent(*body) : std::nullopt;
  if (!intent) return Finish(std::move(outcome), OutcomeKind::kUntrustedResponse, "200 without a PaymentIntent");
  return FromIntent(std::move(outcome), std::move(*intent), sent.expect, OutcomeKind::kCaptured);
}

StripeEventsPage ClassifyStripeEventsPage(const TransportResult& result, std::string_view idempotency_key,
                                          system_clock::time_point now) {
  StripeEventsPage page;
  if (auto failed = ClassifyTransportFailure(Operation::kLookup, result, now)) {
    page.outcome = std::move(*failed);
    return page;
  }
  auto outcome = Start(Operation::kLookup, result, now);
  const auto& response = *result.response;
  if (response.status != 200) {
    page.outcome = ClassifyStripeStatus(std::move(outcome), response, Stored::kNo);
    return page;
  }
  const auto body = ParseJson(response.body);
  const auto* data = body ? DataArray(*body) : nullptr;
  if (data == nullptr) {
    page.outcome = Finish(std::move(outcome), OutcomeKind::kUntrustedResponse, "events: 200 without a data array");
    return page;
  }
  std::optional<std::string> last_id;
  for (const auto& entry : *data) {
    const auto* event = entry.if_object();
    auto id = event ? NonEmptyString(*event, "id") : std::nullopt;
    if (!id) {
      page.outcome = Finish(std::move(outcome), OutcomeKind::kUntrustedResponse, "events: an event without an id");
      return page;
    }
    last_id = id;
    if (page.payment_intent_id) continue;
    const auto* request = event->if_contains("request");
    if (request == nullptr || !request->is_object()) continue;
    if (NonEmptyString(request->get_object(), "idempotency_key") != idempotency_key) continue;
    const auto* data_object = event->if_contains("data");
    const auto* object = data_object && data_object->is_object() ? data_object->get_object().if_contains("object")
                                                                  : nullptr;
    if (object == nullptr || !object->is_object()) continue;
    const auto& o = object->get_object();
    if (NonEmptyString(o, "object") != "payment_intent") continue;
    page.payment_intent_id = NonEmptyString(o, "id");
  }
  if (HasMore(*body)) page.next_cursor = last_id;
  page.outcome = Finish(std::move(outcome), OutcomeKind::kPage, "");
  return page;
}

AttemptOutcome ClassifyStripeRefund(const TransportResult& result, system_clock::time_point now) {
  if (auto failed = ClassifyTransportFailure(Operation::kVoid, result, now)) return std::move(*failed);
  auto outcome = Start(Operation::kVoid, result, now);
  const auto& response = *result.response;
  if (response.status == 200) {
    const auto body = ParseJson(response.body);
    const auto* object = body ? body->if_object() : nullptr;
    const auto status = object ? NonEmptyString(*object, "status") : std::nullopt;
    if (!status) return Finish(std::move(outcome), OutcomeKind::kUntrustedResponse, "200 without a refund status");
    // pending: Stripe accepted the refund and the money is on its way back; no later step of ours changes it.
    if (*status == "succeeded" || *status == "pending") return Finish(std::move(outcome), OutcomeKind::kVoided, "");
    return Finish(std::move(outcome), OutcomeKind::kContractError, "refund " + std::string(Known(*status)));
  }
  if (response.status == 400 && ErrorOf(response).code == "charge_already_refunded") {
    // Our own refund whose answer was lost, under another key, or anyone's: the money is back either way,
    // as our protocol answers a void of a voided capture.
    return Finish(std::move(outcome), OutcomeKind::kVoided, "charge_already_refunded");
  }
  return ClassifyStripeStatus(std::move(outcome), response, Stored::kYes);
}

AttemptOutcome ClassifyStripeListPage(const TransportResult& result, system_clock::time_point now) {
  if (auto failed = ClassifyTransportFailure(Operation::kList, result, now)) return std::move(*failed);
  auto outcome = Start(Operation::kList, result, now);
  const auto& response = *result.response;
  if (response.status != 200) return ClassifyStripeStatus(std::move(outcome), response, Stored::kNo);
  const auto body = ParseJson(response.body);
  const auto* data = body ? DataArray(*body) : nullptr;
  if (data == nullptr) return Finish(std::move(outcome), OutcomeKind::kUntrustedResponse, "200 without a data array");
  std::vector<Capture> page;
  std::optional<std::string> last_id;
  for (const auto& entry : *data) {
    auto intent = ReadIntent(entry);
    // One unreadable entry makes the page untrusted: "absent" is never concluded from a page read in part.
    if (!intent) return Finish(std::move(outcome), OutcomeKind::kUntrustedResponse, "an unreadable PaymentIntent");
    last_id = intent->seen.id;
    // Declined, processing or abandoned PaymentIntents moved no money: not captures.
    if (std::holds_alternative<Succeeded>(intent->state)) page.push_back(std::move(intent->seen));
  }
  if (HasMore(*body)) {
    if (!last_id) return Finish(std::move(outcome), OutcomeKind::kUntrustedResponse, "has_more on an empty page");
    outcome.next_page_token = std::move(last_id);
  }
  outcome.page = std::move(page);
  return Finish(std::move(outcome), OutcomeKind::kPage, "");
}

}  // namespace charge_outbox::acquirer
