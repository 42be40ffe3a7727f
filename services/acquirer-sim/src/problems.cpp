#include "problems.hpp"

#include <string>

namespace charge_outbox::acquirer_sim {
namespace {

namespace bhttp = boost::beast::http;
using http::Response;
using http::Status;

Response WithRetryAfter(Response response, std::int64_t seconds) {
  response.set(bhttp::field::retry_after, std::to_string(seconds));
  return response;
}

Response WithField(Status status, std::string_view title, std::string_view field, std::string_view detail) {
  boost::json::object extra;
  extra["field"] = field;
  return http::ProblemJson(status, title, detail, extra);
}

}  // namespace

Response FieldError(std::string_view field, std::string_view detail) {
  return WithField(Status::bad_request, "Invalid request", field, detail);
}

Response InvalidFaultProfile(const ProfileError& error) {
  return WithField(Status::bad_request, "Invalid fault profile", error.field,
                   error.field.empty() ? error.problem : error.field + ": " + error.problem);
}

Response Unauthorized() {
  auto response = http::ProblemJson(Status::unauthorized, "Unauthorized",
                                    "send Authorization: Bearer <key> with a key this acquirer knows");
  response.set(bhttp::field::www_authenticate, "Bearer");
  return response;
}

Response NotFound(std::string_view detail) { return http::ProblemJson(Status::not_found, "Not found", detail); }

Response MethodNotAllowed(std::string_view allow) {
  auto response =
      http::ProblemJson(Status::method_not_allowed, "Method not allowed", "this path accepts " + std::string(allow));
  response.set(bhttp::field::allow, allow);
  return response;
}

Response RequestInProgress() {
  return WithRetryAfter(
      http::ProblemJson(Status::conflict, "Request in progress",
                        "a request with this Idempotency-Key is still being processed; retry later"),
      1);
}

Response IdempotencyKeyReused(std::string_view detail) {
  return http::ProblemJson(Status::unprocessable_entity, "Idempotency key reused", detail);
}

Response CaptureSettled() {
  return http::ProblemJson(Status::unprocessable_entity, "Capture settled",
                           "this capture has settled and can no longer be voided; nothing was voided");
}

Response ServerError() {
  return http::ProblemJson(Status::internal_server_error, "Internal server error",
                           "the acquirer failed while processing the request; it may or may not have been done");
}

Response StorageUnavailable() {
  return http::ProblemJson(Status::service_unavailable, "Storage unavailable",
                           "the capture log could not be written; nothing was captured, retry later");
}

Response FaultRefusal(const FaultDecision& decision, std::string_view consequence) {
  auto response =
      decision.throttle
          ? http::ProblemJson(Status::too_many_requests, "Too many requests",
                              "rate limit exceeded" + std::string(consequence))
          : http::ProblemJson(Status::service_unavailable, "Service unavailable",
                              "temporary failure" + std::string(consequence));
  return WithRetryAfter(std::move(response), decision.retry_after_s);
}

}  // namespace charge_outbox::acquirer_sim
