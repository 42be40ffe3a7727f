// Retryability: the one vocabulary for what a caller may do after an outcome, whatever the outcome came
// from. Each domain classifies its own outcomes into it in exactly one function (acquirer::RetryabilityOf
// for acquirer calls, db::RetryabilityOf for database errors, kafka::RetryabilityOf for deliveries), so
// the list of transient cases is written once per domain and every retry loop, HTTP mapping and log
// reads the class instead of listing cases again. See docs/decisions.md ("One backoff, one
// retryability").
#pragma once

#include <string_view>

namespace charge_outbox::retry {

enum class Retryability {
  kDefinitive,  // an answer (a success, a decline, a persisted message): doing it again gives the same one
  kTransient,   // not answered, and the same call may succeed if made again later: retry it (idempotently)
  kNever,       // doing it again fails the same way: stop until someone fixes data, configuration or state
};

constexpr bool IsTransient(Retryability retryability) { return retryability == Retryability::kTransient; }

// Stable snake_case names ("definitive", "transient", "never") for logs and metric labels.
std::string_view ToString(Retryability retryability);

}  // namespace charge_outbox::retry
