// The Stripe adapter's table (docs/stripe.md, "What Stripe's answers become"): what each Stripe answer
// proves, as an AttemptOutcome whose kind gives the evidence class and the retryability, exactly as our
// protocol's classifier does. Pure functions over plain data; StripeAcquirerClient calls exactly these.
//
// Decisions not obvious from Stripe's documentation:
// - A PaymentIntent is ours when its amount, currency and metadata.charge_id are the charge's; a succeeded one
//   that is not is a mismatch, and so are two PaymentIntents naming one charge (our key makes one: a second
//   can only come from a key used past its retention, or from someone else): a person looks.
// - A 500 to a POST is stored by Stripe under the key and replayed for it: `stored_error`, never retried with
//   that key (it can only replay), never a decline. A GET's 500 stores nothing and is retried.
// - A refunded PaymentIntent stays `succeeded` at Stripe; its latest charge says `refunded`: our capture,
//   voided.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "charge_outbox/acquirer/classifier.hpp"
#include "charge_outbox/acquirer/model.hpp"

namespace charge_outbox::acquirer {

// POST /v1/payment_intents, read against what was sent.
AttemptOutcome ClassifyStripeCapture(const TransportResult& result, const CaptureRequest& sent,
                                     std::chrono::system_clock::time_point now);
// GET /v1/payment_intents/search: the PaymentIntent naming sent.expect->reference, or kNotFound.
AttemptOutcome ClassifyStripeSearch(const TransportResult& result, const LookupRequest& sent,
                                    std::chrono::system_clock::time_point now);
// GET /v1/payment_intents/{id}: the PaymentIntent an event named, as it is now.
AttemptOutcome ClassifyStripeRetrieve(const TransportResult& result, const LookupRequest& sent,
                                      std::chrono::system_clock::time_point now);

// GET /v1/events: one page, searched for the event a request with our key caused.
struct StripeEventsPage {
  AttemptOutcome outcome;  // kPage when the page was read, else why not
  std::optional<std::string> payment_intent_id;  // the PaymentIntent the first matching event names
  std::optional<std::string> next_cursor;        // starting_after for the next page, when has_more
};
StripeEventsPage ClassifyStripeEventsPage(const TransportResult& result, std::string_view idempotency_key,
                                          std::chrono::system_clock::time_point now);

// POST /v1/refunds.
AttemptOutcome ClassifyStripeRefund(const TransportResult& result, std::chrono::system_clock::time_point now);
// GET /v1/payment_intents?created...: the succeeded PaymentIntents of the page as captures (refunded ones
// voided); the next page's token is the page's last id, when has_more.
AttemptOutcome ClassifyStripeListPage(const TransportResult& result, std::chrono::system_clock::time_point now);

// The latest `created` a PaymentIntent is read with: 2199-12-31T23:59:59Z, well inside what a system_clock
// time point holds (nanoseconds: until 2262). A later one, or a negative one, makes the PaymentIntent unreadable.
inline constexpr std::int64_t kLatestStripeCreated = 7258118399;

// "2026-12-05T15:00:00.000000Z" for Stripe's `created` (Unix seconds), clamped to [0, kLatestStripeCreated].
std::string StripeCreatedAt(std::int64_t unix_seconds);

}  // namespace charge_outbox::acquirer
