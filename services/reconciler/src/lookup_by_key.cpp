#include "lookup_by_key.hpp"

#include <string>
#include <utility>

namespace charge_outbox::reconciler {

boost::asio::awaitable<acquirer::RetryRun> LookupByKey(acquirer::AcquirerClient& acquirer,
                                                       const acquirer::RetryPolicy& policy, util::Clock& clock,
                                                       charges::AttemptRecorder& recorder,
                                                       const charges::Charge& charge) {
  const acquirer::LookupRequest lookup{
      charges::AcquirerIdempotencyKey(charge),
      acquirer::ExpectedCapture{charge.amount, charge.currency, charge.public_id()}, charge.created_at};
  const auto lookup_call = [&](std::string request_id) {
    return acquirer.LookupByKey(lookup, std::move(request_id));
  };
  co_return co_await charges::RunRecorded(policy, clock, recorder, lookup_call);
}

}  // namespace charge_outbox::reconciler
