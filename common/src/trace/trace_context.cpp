#include "charge_outbox/trace/trace_context.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <random>

#include "charge_outbox/util/sha256.hpp"

namespace charge_outbox::trace {
namespace {

bool IsLowerHex(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool AllZero(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == '0'; });
}

std::string RandomHex(std::size_t bytes) {
  thread_local std::mt19937_64 engine{std::random_device{}()};
  std::array<std::uint8_t, 16> buf{};
  std::string out;
  do {
    for (std::size_t i = 0; i < bytes; ++i) buf[i] = static_cast<std::uint8_t>(engine());
    out = util::ToHex(buf.data(), bytes);
  } while (AllZero(out));
  return out;
}

}  // namespace

std::string TraceContext::ToTraceparent() const {
  return "00-" + trace_id + "-" + span_id + (sampled ? "-01" : "-00");
}

std::optional<TraceContext> ParseTraceparent(std::string_view h) {
  // version(2) - trace-id(32) - parent-id(16) - flags(2); later versions may append "-..." fields.
  if (h.size() < 55 || h[2] != '-' || h[35] != '-' || h[52] != '-') return std::nullopt;
  const auto version = h.substr(0, 2);
  if (!IsLowerHex(version) || version == "ff") return std::nullopt;
  if (version == "00" && h.size() != 55) return std::nullopt;
  if (version != "00" && h.size() > 55 && h[55] != '-') return std::nullopt;
  TraceContext ctx;
  ctx.trace_id = std::string(h.substr(3, 32));
  ctx.span_id = std::string(h.substr(36, 16));
  const auto flags = h.substr(53, 2);
  if (!IsLowerHex(ctx.trace_id) || !IsLowerHex(ctx.span_id) || !IsLowerHex(flags)) return std::nullopt;
  if (AllZero(ctx.trace_id) || AllZero(ctx.span_id)) return std::nullopt;
  ctx.sampled = (std::stoi(std::string(flags), nullptr, 16) & 1) != 0;
  return ctx;
}

TraceContext NewTrace() { return {RandomHex(16), RandomHex(8), true}; }

TraceContext ChildOf(const TraceContext& parent) { return {parent.trace_id, RandomHex(8), parent.sampled}; }

}  // namespace charge_outbox::trace
