#include "api_tokens.hpp"

#include <boost/beast/http/field.hpp>
#include <boost/json/object.hpp>

#include <algorithm>
#include <cctype>
#include <string>

#include "charge_outbox/config/config.hpp"

namespace charge_outbox::settlement {
namespace {

namespace bhttp = boost::beast::http;
using Status = http::Status;

constexpr std::size_t kMaxTokenSize = 512;

std::string_view TrimSpaces(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  const char lower = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower >= 'a' && lower <= 'f') return lower - 'a' + 10;
  return -1;
}

std::optional<util::Sha256Digest> DigestFromHex(std::string_view hex) {
  util::Sha256Digest digest{};
  if (hex.size() != digest.size() * 2) return std::nullopt;
  for (std::size_t i = 0; i < digest.size(); ++i) {
    const int high = HexDigit(hex[2 * i]);
    const int low = HexDigit(hex[2 * i + 1]);
    if (high < 0 || low < 0) return std::nullopt;
    digest[i] = static_cast<std::uint8_t>(high * 16 + low);
  }
  return digest;
}

// RFC 6750's b64token: 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
bool IsB64Token(std::string_view token) {
  const auto padding = token.find_first_of('=');
  const auto body = token.substr(0, padding);
  if (body.empty()) return false;
  if (padding != std::string_view::npos && token.find_first_not_of('=', padding) != std::string_view::npos) return false;
  return std::all_of(body.begin(), body.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '.' || c == '_' || c == '~' ||
           c == '+' || c == '/';
  });
}

bool IsBearerScheme(std::string_view scheme) {
  constexpr std::string_view kBearer = "bearer";
  return scheme.size() == kBearer.size() &&
         std::equal(scheme.begin(), scheme.end(), kBearer.begin(),
                    [](char a, char b) { return std::tolower(static_cast<unsigned char>(a)) == b; });
}

http::Response Problem(std::string_view slug, std::string_view title, std::string_view detail,
                       std::string_view invalid_token) {
  auto r = http::ProblemJson(Status::unauthorized, title, detail,
                             boost::json::object{{"type", "urn:charge-outbox:problem:" + std::string(slug)}});
  r.set(bhttp::field::www_authenticate,
        invalid_token.empty() ? std::string("Bearer")
                              : R"(Bearer error="invalid_token", error_description=")" + std::string(invalid_token) + "\"");
  return r;
}

}  // namespace

std::vector<util::Sha256Digest> ParseTokenHashes(std::string_view key, std::string_view text) {
  std::vector<util::Sha256Digest> out;
  if (TrimSpaces(text).empty()) return out;
  std::size_t entry = 0;
  while (true) {
    ++entry;
    const auto comma = text.find(',');
    const auto item = TrimSpaces(text.substr(0, comma));
    const auto digest = DigestFromHex(item);
    if (!digest) {
      throw config::ConfigError(std::string(key), "entry " + std::to_string(entry) +
                                                      " is not a SHA-256 hex digest (64 hex digits); give the "
                                                      "tokens' hashes, comma-separated (printf %s \"$TOKEN\" | "
                                                      "sha256sum), never a token");
    }
    out.push_back(*digest);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

ApiTokens::ApiTokens(std::vector<util::Sha256Digest> accepted) : accepted_(std::move(accepted)) {}

TokenCheck ApiTokens::Check(std::optional<std::string_view> authorization) const {
  const auto header = TrimSpaces(authorization.value_or(""));
  if (header.empty()) return TokenCheck::kMissing;
  const auto space = header.find(' ');
  if (!IsBearerScheme(header.substr(0, space))) return TokenCheck::kOtherScheme;
  const auto token = space == std::string_view::npos ? std::string_view{} : TrimSpaces(header.substr(space));
  if (token.size() > kMaxTokenSize || !IsB64Token(token)) return TokenCheck::kMalformed;
  const auto presented = util::Sha256(token);
  std::uint8_t matched = 0;
  for (const auto& hash : accepted_) {
    std::uint8_t difference = 0;
    for (std::size_t i = 0; i < hash.size(); ++i) difference |= static_cast<std::uint8_t>(hash[i] ^ presented[i]);
    matched |= static_cast<std::uint8_t>(difference == 0);
  }
  return matched != 0 ? TokenCheck::kAccepted : TokenCheck::kUnknown;
}

std::optional<http::Response> ApiTokens::Refusal(const http::Request& request) const {
  std::optional<std::string_view> authorization;
  if (const auto field = request.find(bhttp::field::authorization); field != request.end()) {
    authorization = std::string_view(field->value().data(), field->value().size());
  }
  const auto check = Check(authorization);
  if (check == TokenCheck::kAccepted) return std::nullopt;
  return Unauthorized(check);
}

http::Response Unauthorized(TokenCheck check) {
  switch (check) {
    case TokenCheck::kMissing:
      return Problem("token-missing", "Bearer token missing",
                     "Send Authorization: Bearer <token>, a token this projection's operators gave you.", "");
    case TokenCheck::kOtherScheme:
      return Problem("token-malformed", "Authorization is not a bearer token",
                     "Send Authorization: Bearer <token>; no other scheme is accepted.", "");
    case TokenCheck::kMalformed:
      return Problem("token-malformed", "Bearer token malformed",
                     "A token is 1 to 512 characters of A-Z, a-z, 0-9, -._~+/ (then = padding) after \"Bearer \".",
                     "malformed token");
    case TokenCheck::kUnknown:
      return Problem("token-unknown", "Unknown or withdrawn bearer token",
                     "This token is not accepted (unknown, or withdrawn at a rotation). Ask the projection's "
                     "operators for a current one.",
                     "unknown or withdrawn token");
    case TokenCheck::kAccepted:
      break;
  }
  return http::ProblemJson(Status::internal_server_error, "Internal Server Error", "an accepted token was refused");
}

}  // namespace charge_outbox::settlement
