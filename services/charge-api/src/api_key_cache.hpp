// ApiKeyCache: merchant authentication with a short-lived memory of recent answers, so a request costs
// no database round trip for its API key. A revoked key stops working within the TTL.
#pragma once

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "charge_outbox/charges/charge_store.hpp"

namespace charge_outbox::charge_api {

// Thread-safe. Holds SHA-256 hashes of keys, never the keys.
class ApiKeyCache {
 public:
  ApiKeyCache(charges::ChargeStore& store, std::chrono::milliseconds ttl, std::size_t max_entries = 10'000);

  boost::asio::awaitable<db::DbResult<std::optional<charges::Merchant>>> Authenticate(const std::string& api_key);

 private:
  struct Entry {
    std::optional<charges::Merchant> merchant;
    std::chrono::steady_clock::time_point expires;
  };
  charges::ChargeStore& store_;
  std::chrono::milliseconds ttl_;
  std::size_t max_entries_;
  std::mutex mutex_;
  std::unordered_map<std::string, Entry> entries_;
};

// The key of "Authorization: Bearer <key>", or nullopt when the header is missing or not a bearer key.
std::optional<std::string> BearerKey(std::string_view authorization);

}  // namespace charge_outbox::charge_api
