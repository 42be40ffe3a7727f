// The authenticated requests /admin/stats counts, by kind, for both dialects: a test can prove a call
// never reached the acquirer (an attempt that could not be recorded is not sent).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string_view>

namespace charge_outbox::acquirer_sim {

// The Stripe dialect counts as its equivalents: POST /v1/payment_intents as kCapture, POST /v1/refunds
// as kVoid, GET /v1/payment_intents as kList; search, retrieve and events have their own.
enum class RequestKind { kCapture, kLookup, kVoid, kList, kSearch, kRetrieve, kEvents };
inline constexpr RequestKind kRequestKinds[] = {RequestKind::kCapture, RequestKind::kLookup,  RequestKind::kVoid,
                                                RequestKind::kList,    RequestKind::kSearch,  RequestKind::kRetrieve,
                                                RequestKind::kEvents};
std::string_view ToString(RequestKind kind);

// Thread-safe counters, since start-up or the last Reset.
class RequestCounts {
 public:
  void Count(RequestKind kind) { ++counts_[static_cast<std::size_t>(kind)]; }
  std::uint64_t Get(RequestKind kind) const { return counts_[static_cast<std::size_t>(kind)].load(); }
  void Reset() {
    for (auto& count : counts_) count = 0;
  }

 private:
  std::array<std::atomic<std::uint64_t>, std::size(kRequestKinds)> counts_{};
};

}  // namespace charge_outbox::acquirer_sim
