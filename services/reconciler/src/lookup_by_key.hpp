// LookupByKey as the reconciler asks it, in the pending sweep and the window report alike: did the
// acquirer capture this charge (under its idempotency key, for its amount and currency)? One operation
// under the retry policy, every attempt on the caller's recorder, which the caller then flushes or hands
// to the statement that resolves the charge.
#pragma once

#include <boost/asio/awaitable.hpp>

#include "charge_outbox/acquirer/acquirer_client.hpp"
#include "charge_outbox/acquirer/retry_policy.hpp"
#include "charge_outbox/charges/attempt_recorder.hpp"
#include "charge_outbox/charges/charge.hpp"

namespace charge_outbox::reconciler {

boost::asio::awaitable<acquirer::RetryRun> LookupByKey(acquirer::AcquirerClient& acquirer,
                                                       const acquirer::RetryPolicy& policy, util::Clock& clock,
                                                       charges::AttemptRecorder& recorder,
                                                       const charges::Charge& charge);

}  // namespace charge_outbox::reconciler
