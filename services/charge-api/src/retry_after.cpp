#include "retry_after.hpp"

#include <algorithm>

namespace charge_outbox::charge_api {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

seconds AtLeastOne(milliseconds wait) { return std::max(seconds{1}, std::chrono::ceil<seconds>(wait)); }

}  // namespace

seconds InFlightRetryAfter(milliseconds lease_remaining, const RetryAfterTimes& times) {
  if (lease_remaining <= milliseconds::zero()) return seconds{1};
  const auto since_call = std::max(milliseconds::zero(), times.lease - lease_remaining);
  // Compared, not subtracted from: longest_run may be milliseconds::max() (no budget).
  if (since_call >= times.longest_run) return AtLeastOne(lease_remaining);  // overdue: the lease decides
  return AtLeastOne(std::min(times.longest_run - since_call, lease_remaining));
}

seconds PendingRetryAfter(const charges::Charge& charge, PendingWait wait, const RetryAfterTimes& times) {
  using charges::ChargeStatus;
  switch (charge.status) {
    case ChargeStatus::kNeedsReview: return std::max(seconds{1}, times.person);
    case ChargeStatus::kPending: break;
    case ChargeStatus::kCaptured:
    case ChargeStatus::kFailed:
    case ChargeStatus::kCanceled: return seconds{1};
  }
  switch (wait) {
    case PendingWait::kRetry: return AtLeastOne(times.retry_pause);
    case PendingWait::kReconciler: return std::max(seconds{1}, times.reconciler_run);
    case PendingWait::kOurLease: return AtLeastOne(times.lease);
    case PendingWait::kAsRead:
      if (charge.lease_remaining > milliseconds::zero()) return InFlightRetryAfter(charge.lease_remaining, times);
      return AtLeastOne(times.retry_pause);
  }
  return AtLeastOne(times.retry_pause);
}

}  // namespace charge_outbox::charge_api
