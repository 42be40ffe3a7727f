// What a person types into an audited command (a name, a reason): printable, bounded, not blank. Checked
// the same way by every command that writes operator_actions, before anything is changed.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace charge_outbox::util {

inline constexpr std::size_t kMaxOperatorName = 200;
// A reason and an override's reason (charge-admin --against-acquirer) share operator_actions.reason, whose
// check is 2,000 bytes: each gets 900.
inline constexpr std::size_t kMaxOperatorReason = 900;

// Why `text` cannot be on record ("is longer than 200 bytes", ...), or nullopt when it can.
std::optional<std::string> OperatorTextProblem(std::string_view text, std::size_t max);

}  // namespace charge_outbox::util
