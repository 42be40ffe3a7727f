// charge-admin's orphan commands: what a person does with a capture the acquirer holds and no charge of
// ours names (the window report's `capture_without_local_record`, kept in orphan_captures). Each asks
// the acquirer first. `orphan void` gives the money back (a void under the capture's own key, so asking
// again is the same void); `orphan adopt` writes back the charge whose record was lost, `captured`, with
// its events, when the acquirer still holds the capture live and its key names the merchant. Each change
// lands with its audit row, and an answer that is not the acquirer's confirmation is never called done.
#pragma once

#include <boost/asio/awaitable.hpp>

#include <ostream>
#include <string>

#include "charge_outbox/acquirer/acquirer_client.hpp"
#include "charge_outbox/acquirer/retry_policy.hpp"
#include "charge_outbox/charges/orphan_capture_store.hpp"
#include "charge_outbox/charges/review_store.hpp"
#include "charge_outbox/util/clock.hpp"
#include "command_line.hpp"

namespace charge_outbox::charge_admin {

struct OrphanTools {
  charges::OrphanCaptureStore& orphans;
  charges::ReviewStore& review;  // to tell whether a charge of ours holds a capture's reference now
  acquirer::AcquirerClient& acquirer;
  const acquirer::RetryPolicy& policy;
  util::Clock& clock;
  std::ostream& out;
  std::ostream& err;
};

// Exit status as RunCommand's: 0 done (or already so), 1 refused or failed.
boost::asio::awaitable<int> ListOrphans(OrphanTools tools, const CommandLine& command);
boost::asio::awaitable<int> ShowOrphan(OrphanTools tools, const CommandLine& command);
boost::asio::awaitable<int> VoidOrphan(OrphanTools tools, const CommandLine& command);
boost::asio::awaitable<int> AdoptOrphan(OrphanTools tools, const CommandLine& command);

// The charge a capture would be adopted as: the one charge-api made it for, named by its reference (our
// public id) and its acquirer key (`<merchant>:<client key>`). `refusal` is set, saying why, when the
// capture is not one charge-api made for `merchant_id`. Pure.
struct AdoptionTarget {
  std::string charge_id;  // uuid
  std::string idempotency_key;
  std::string refusal;
};
AdoptionTarget AdoptionTargetOf(const acquirer::Capture& capture, const std::string& merchant_id);

// The key of a void of the capture: the capture's own, so that a void asked again (a retry, a second
// person) is the same void at the acquirer. Pure.
std::string VoidKeyOf(const acquirer::Capture& capture);

}  // namespace charge_outbox::charge_admin
