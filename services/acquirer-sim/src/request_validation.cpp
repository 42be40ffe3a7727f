#include "request_validation.hpp"

#include <boost/json/monotonic_resource.hpp>
#include <boost/json/parse.hpp>
#include <algorithm>
#include <charconv>
#include <limits>

namespace charge_outbox::acquirer_sim {
namespace {

namespace json = boost::json;

constexpr std::size_t kMaxTextField = 255;
constexpr std::string_view kPageTokenPrefix = "pt_";

}  // namespace

bool IsValidIdempotencyKey(std::string_view key) {
  if (key.empty() || key.size() > kMaxTextField) return false;
  for (const char c : key) {
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

boost::system::result<CaptureRequest, FieldProblem> ParseCaptureRequest(std::string_view body) {
  // Parsed into a stack buffer: a capture body is small, and this is the hot path.
  unsigned char storage[2048];
  json::monotonic_resource resource(storage, sizeof storage);
  json::parse_options options;
  options.max_depth = 4;
  boost::system::error_code ec;
  const auto value = json::parse(body, ec, &resource, options);
  if (ec) return FieldProblem{"body", "the body is not valid JSON: " + ec.message()};
  if (!value.is_object()) return FieldProblem{"body", "the body must be a JSON object"};
  CaptureRequest request;
  bool has_amount = false;
  std::string* text_target = nullptr;
  for (const auto& member : value.get_object()) {
    const std::string_view name = member.key();
    const auto& v = member.value();
    if (name == "amount") {
      if (v.is_int64() && v.get_int64() > 0) {
        request.amount = v.get_int64();
      } else if (v.is_uint64() && v.get_uint64() <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        request.amount = static_cast<std::int64_t>(v.get_uint64());
      } else {
        return FieldProblem{"amount", "amount must be an integer number of minor units greater than 0"};
      }
      has_amount = true;
      continue;
    }
    if (name == "currency") {
      const bool ok = v.is_string() && v.get_string().size() == 3 &&
                      std::all_of(v.get_string().begin(), v.get_string().end(), [](char c) { return c >= 'A' && c <= 'Z'; });
      if (!ok) return FieldProblem{"currency", "currency must be an ISO 4217 code of three upper-case letters"};
      request.currency = std::string(v.get_string());
      continue;
    }
    if (name == "reference") text_target = &request.reference;
    else if (name == "payment_method") text_target = &request.payment_method;
    else return FieldProblem{std::string(name), "unknown member \"" + std::string(name) + "\""};
    if (!v.is_string() || v.get_string().empty() || v.get_string().size() > kMaxTextField) {
      return FieldProblem{std::string(name), std::string(name) + " must be a string of 1 to 255 characters"};
    }
    *text_target = std::string(v.get_string());
  }
  if (!has_amount) return FieldProblem{"amount", "amount is required"};
  if (request.currency.empty()) return FieldProblem{"currency", "currency is required"};
  if (request.reference.empty()) return FieldProblem{"reference", "reference is required"};
  if (request.payment_method.empty()) return FieldProblem{"payment_method", "payment_method is required"};
  return request;
}

std::string PageToken(std::uint64_t cursor) {
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, cursor, 16);
  return std::string(kPageTokenPrefix) + std::string(buf, end);
}

std::optional<std::uint64_t> ParsePageToken(std::string_view token) {
  if (!token.starts_with(kPageTokenPrefix)) return std::nullopt;
  token.remove_prefix(kPageTokenPrefix.size());
  std::uint64_t cursor = 0;
  const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), cursor, 16);
  if (ec != std::errc{} || end != token.data() + token.size() || token.empty()) return std::nullopt;
  return cursor;
}

}  // namespace charge_outbox::acquirer_sim
