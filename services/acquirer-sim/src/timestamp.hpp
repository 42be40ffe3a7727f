// Timestamps on the acquirer's wire and in its log: Unix microseconds in memory, RFC 3339 in UTC with
// microseconds on the wire ("2026-11-30T02:53:00.367123Z"), so that a client can pass a capture's
// created_at back as a list bound without losing precision.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace charge_outbox::acquirer_sim {

// The wire text of a timestamp, formatted in place: a JSON body takes it as a string_view without the
// heap allocation a std::string of its 27 characters would cost on the capture path.
class TimestampText {
 public:
  explicit TimestampText(std::int64_t unix_micros);
  std::string_view view() const { return {text_, size_}; }

 private:
  char text_[40];
  std::size_t size_ = 0;
};

std::string FormatTimestamp(std::int64_t unix_micros);

// Accepts any RFC 3339 date-time: "T" or "t", an optional fraction (digits past microseconds are
// truncated), "Z", "z" or a numeric offset. std::nullopt if the text is not one.
std::optional<std::int64_t> ParseTimestamp(std::string_view text);

}  // namespace charge_outbox::acquirer_sim
