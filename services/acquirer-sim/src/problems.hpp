// The acquirer's refusals, as RFC 9457 problem+json: one builder per kind of refusal, so that each is
// worded once, whichever handler gives it.
#pragma once

#include <string_view>

#include "charge_outbox/http/server.hpp"
#include "fault_profile.hpp"

namespace charge_outbox::acquirer_sim {

// 400 naming the member, header or query parameter at fault in "field".
http::Response FieldError(std::string_view field, std::string_view detail);
// 400 for a PUT /admin/faults body.
http::Response InvalidFaultProfile(const ProfileError& error);
// 401 with WWW-Authenticate: Bearer.
http::Response Unauthorized();
http::Response NotFound(std::string_view detail);
// 405 with the Allow header.
http::Response MethodNotAllowed(std::string_view allow);
// 409 with Retry-After: the key's first request is still being processed.
http::Response RequestInProgress();
// 422: the key was used for something else; `consequence` says what was not done.
http::Response IdempotencyKeyReused(std::string_view detail);
// 422: a void of a capture past the void window (fault profile void_window_ms).
http::Response CaptureSettled();
// 500: the fault profile's server_error_rate (the work may or may not have been done).
http::Response ServerError();
// 503: the capture log could not be written.
http::Response StorageUnavailable();

// The answer to a request the fault profile throttles (429) or fails (503), with Retry-After.
// `consequence` ends the detail ("; nothing was captured, ..."), or is empty. Only for a decision with
// throttle or error set.
http::Response FaultRefusal(const FaultDecision& decision, std::string_view consequence = {});

}  // namespace charge_outbox::acquirer_sim
