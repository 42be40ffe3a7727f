// Private to the acquirer adapters: the pieces of classification every adapter's table shares (the
// transport's failures, JSON within limits, the outcome's one-line detail), so that the Stripe table reads
// its answers with the same rules as ours.
#pragma once

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "charge_outbox/acquirer/classifier.hpp"

namespace charge_outbox::acquirer::detail {

// JSON within kMaxJsonBodyBytes and kMaxJsonDepth; nullopt otherwise or when it does not parse.
std::optional<boost::json::value> ParseJson(std::string_view body);
std::optional<std::string> NonEmptyString(const boost::json::object& object, std::string_view key);
std::optional<std::int64_t> PositiveInteger(const boost::json::object& object, std::string_view key);

// An outcome of `operation` carrying the transport's status, the HTTP status and Retry-After.
AttemptOutcome Start(Operation operation, const TransportResult& result, std::chrono::system_clock::time_point now);
// Sets the kind and the detail line ("capture: HTTP 500: why").
AttemptOutcome Finish(AttemptOutcome outcome, OutcomeKind kind, std::string_view why);
// Failures before a response (not_sent only when no byte left); nullopt when a response arrived.
std::optional<AttemptOutcome> ClassifyTransportFailure(Operation operation, const TransportResult& result,
                                                       std::chrono::system_clock::time_point now);

}  // namespace charge_outbox::acquirer::detail
