// What the Stripe dialect accepts: Stripe's form encoding (bodies and query strings alike) and each
// route's parameters. Pure functions, unit-tested without a server; a refusal is a StripeParamError,
// which the handler answers as Stripe's 400 invalid_request_error.
#pragma once

#include <boost/system/result.hpp>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "capture_store.hpp"

namespace charge_outbox::acquirer_sim {

// Name/value pairs in the order sent, percent-decoded ('+' is a space, as in any form), so
// "metadata%5Bcharge_id%5D=x" and "metadata[charge_id]=x" are one parameter.
using FormParams = std::vector<std::pair<std::string, std::string>>;

// std::nullopt for a malformed escape ("%zz") or a pair without '='.
std::optional<FormParams> ParseForm(std::string_view text);

// The form compared for "same parameters" by the idempotency layer: the route, then the pairs sorted by
// name (repeated names keep their order: expand[] lists are ordered). As JSON text, unambiguous.
std::string CanonicalParams(std::string_view route, FormParams params);

struct StripeParamError {
  std::string code;   // parameter_unknown, parameter_missing, parameter_invalid_integer, ...
  std::string param;  // the parameter at fault
  std::string message;
};

template <class T>
using StripeParsed = boost::system::result<T, StripeParamError>;

// POST /v1/payment_intents. request.currency is upper-case (the ledger's), request.reference is
// metadata[charge_id].
struct IntentCreate {
  CaptureRequest request;
  bool expand_latest_charge = false;
};
StripeParsed<IntentCreate> ParseIntentCreate(const FormParams& params);

// POST /v1/refunds.
struct RefundCreate {
  std::string payment_intent;
  std::optional<std::int64_t> amount;
  std::optional<std::string> reason;
  std::map<std::string, std::string> metadata;
};
StripeParsed<RefundCreate> ParseRefundCreate(const FormParams& params);

// GET /v1/payment_intents/{id}.
struct IntentRetrieve {
  bool expand_latest_charge = false;
};
StripeParsed<IntentRetrieve> ParseIntentRetrieve(const FormParams& params);

// GET /v1/payment_intents/search. `page` is the next_page an earlier answer gave.
struct IntentSearch {
  std::string charge_id;
  std::size_t limit = 10;
  std::size_t offset = 0;
  bool expand_latest_charge = false;
};
StripeParsed<IntentSearch> ParseIntentSearch(const FormParams& params);
// The page token for results after the first `offset` ones.
std::string SearchPageToken(std::size_t offset);
// The one query the simulator understands: metadata['charge_id']:'X' (or with double quotes; a
// backslash escapes the quote). std::nullopt for anything else.
std::optional<std::string> ParseChargeIdQuery(std::string_view query);

// GET /v1/payment_intents.
struct IntentList {
  CreatedRange created;
  std::size_t limit = 10;
  std::string starting_after;
  bool expand_latest_charge = false;
};
StripeParsed<IntentList> ParseIntentList(const FormParams& params);

// GET /v1/events. `types` empty: every type.
struct EventList {
  std::vector<StripeEventType> types;
  bool matches_nothing = false;  // only types the simulator never writes were asked for
  CreatedRange created;
  std::size_t limit = 10;
  std::string starting_after;
};
StripeParsed<EventList> ParseEventList(const FormParams& params);

}  // namespace charge_outbox::acquirer_sim
