// Lets gtest print the acquirer enums by name in failure messages instead of as raw bytes.
#pragma once

#include <ostream>

#include "charge_outbox/acquirer/model.hpp"
#include "charge_outbox/acquirer/retry_policy.hpp"

namespace charge_outbox::acquirer {

inline void PrintTo(OutcomeKind v, std::ostream* os) { *os << ToString(v); }
inline void PrintTo(EvidenceClass v, std::ostream* os) { *os << ToString(v); }
inline void PrintTo(TransportStatus v, std::ostream* os) { *os << ToString(v); }
inline void PrintTo(Operation v, std::ostream* os) { *os << ToString(v); }
inline void PrintTo(RetryVerdict v, std::ostream* os) { *os << ToString(v); }

// The acquirer's suites name the common retryability vocabulary as the outcome's own.
using retry::Retryability;

}  // namespace charge_outbox::acquirer

namespace charge_outbox::retry {

inline void PrintTo(Retryability v, std::ostream* os) { *os << ToString(v); }

}  // namespace charge_outbox::retry
