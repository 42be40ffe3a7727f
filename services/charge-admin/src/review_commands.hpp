// The commands of charge-admin, each a coroutine over small interfaces (the stores, the acquirer), so the
// tests run them with fakes as well as against the real thing. Each returns the exit status: 0 done (or
// already so), 1 refused or failed with nothing changed, and writes its answer to `out`, problems to `err`.
#pragma once

#include <boost/asio/awaitable.hpp>

#include <ostream>

#include "charge_outbox/acquirer/acquirer_client.hpp"
#include "charge_outbox/acquirer/retry_policy.hpp"
#include "charge_outbox/charges/charge_store.hpp"
#include "charge_outbox/charges/orphan_capture_store.hpp"
#include "charge_outbox/charges/review_store.hpp"
#include "charge_outbox/merchants/merchant_store.hpp"
#include "charge_outbox/util/clock.hpp"
#include "command_line.hpp"

namespace charge_outbox::charge_admin {

struct Tools {
  charges::ChargeStore& charges;
  charges::ReviewStore& review;
  merchants::MerchantStore& merchants;
  charges::OrphanCaptureStore& orphans;
  acquirer::AcquirerClient& acquirer;
  const acquirer::RetryPolicy& policy;
  util::Clock& clock;
  std::ostream& out;
  std::ostream& err;
};

// The actor name on the acquirer attempts charge-admin records.
inline constexpr const char* kActor = "charge-admin";

boost::asio::awaitable<int> RunCommand(Tools tools, const CommandLine& command);

}  // namespace charge_outbox::charge_admin
