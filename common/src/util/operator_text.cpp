#include "charge_outbox/util/operator_text.hpp"

namespace charge_outbox::util {

std::optional<std::string> OperatorTextProblem(std::string_view text, std::size_t max) {
  if (text.size() > max) return "is longer than " + std::to_string(max) + " bytes";
  bool blank = true;
  for (const char c : text) {
    const auto ch = static_cast<unsigned char>(c);
    if (ch < 0x20 || ch == 0x7f) return "must not contain control characters";
    if (ch != ' ') blank = false;
  }
  if (blank) return "must not be empty";
  return std::nullopt;
}

}  // namespace charge_outbox::util
