// The query API's authentication: `Authorization: Bearer <token>` on every request of the API port, the
// token accepted when its SHA-256 is one of `http.token_hashes`. The configuration holds only hashes (a
// ConfigMap may carry them), several at once so that a new token can be handed out before the old one is
// withdrawn. What is refused, and how, follows charge-api's 401s (docs/charge-api.md): RFC 9457
// problem+json with `WWW-Authenticate: Bearer` (RFC 6750 section 3), no answer telling which tokens exist.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "charge_outbox/http/server.hpp"
#include "charge_outbox/util/sha256.hpp"

namespace charge_outbox::settlement {

// "hash,hash,..." (64 hex digits each, either case; spaces around commas allowed) → the digests. Throws
// config::ConfigError naming `key` on an entry that is not a SHA-256 hex digest (without repeating it:
// a token pasted there by mistake must not reach a log).
std::vector<util::Sha256Digest> ParseTokenHashes(std::string_view key, std::string_view text);

enum class TokenCheck {
  kAccepted,
  kMissing,      // no Authorization header, or a blank one
  kOtherScheme,  // Basic, ...
  kMalformed,    // Bearer, but not an RFC 6750 b64token of 1 to 512 characters
  kUnknown,      // well-formed; its hash is none of the accepted ones
};

// Thread-safe (immutable after construction).
class ApiTokens {
 public:
  explicit ApiTokens(std::vector<util::Sha256Digest> accepted);

  // Every accepted hash is compared in full, without an early exit, whichever matches: the time taken
  // says nothing about which hash, or how much of one, a token came close to.
  TokenCheck Check(std::optional<std::string_view> authorization) const;

  // Check on the request's Authorization header: nullopt when accepted, else the 401 to answer.
  std::optional<http::Response> Refusal(const http::Request& request) const;

 private:
  std::vector<util::Sha256Digest> accepted_;
};

// The 401 problem+json for a refused check (kAccepted is not a refusal: a 500 if asked).
http::Response Unauthorized(TokenCheck check);

}  // namespace charge_outbox::settlement
