// ApiKeyCache: merchant authentication with a bounded memory of recent answers, so that a known key costs
// no database round trip and an unknown one costs at most one per cache TTL.
//
// Two LRU maps, not one: valid keys and unknown keys are remembered apart, so a flood of random keys
// evicts only other random keys, never a merchant's. Concurrent lookups of the same key share one query
// (single flight). A revoked key stops working within the TTL; a key issued after it was tried works
// within the TTL too. Who may ask the database at all (per-client failed-auth limits) is the router's
// business; this class only answers and remembers.
#pragma once

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "charge_api_probe.hpp"
#include "charge_outbox/charges/charge_store.hpp"
#include "charge_outbox/merchants/merchant_store.hpp"
#include "lru_map.hpp"
#include "token_bucket.hpp"

namespace charge_outbox::charge_api {

struct ApiKeyCacheOptions {
  std::chrono::milliseconds ttl{30'000};
  std::size_t valid_entries = 10'000;
  std::size_t unknown_entries = 10'000;
};

// Thread-safe. Holds SHA-256 hashes of keys, never the keys.
class ApiKeyCache {
 public:
  // charge-api gives the authenticator a connection pool of its own, so that lookups never wait for (or
  // hold) the payments pool.
  ApiKeyCache(merchants::Authenticator& store, ChargeApiProbe& probe, ApiKeyCacheOptions options,
              Clock clock = SteadyNow);
  ~ApiKeyCache();

  // The merchant a key belongs to, or nullopt: no such key (or revoked).
  using Answer = std::optional<charges::Merchant>;

  // What memory says of the key, without the database; nullopt when it has no fresh answer.
  std::optional<Answer> Recall(const std::string& api_key);

  // Whether looking the key up now is no sign of guessing: it was valid when last asked (its answer has
  // only expired; a busy merchant must not spend its address's failed-authentication budget at every
  // expiry), or a lookup of it is already running (the one who started it paid). Either may change by
  // the time Lookup runs; the gap costs at most one lookup.
  bool LookupIsFree(const std::string& api_key);

  // Asks the database (one query per key at a time, however many ask) and remembers the answer.
  boost::asio::awaitable<db::DbResult<Answer>> Lookup(const std::string& api_key);

  // Recall, then Lookup.
  boost::asio::awaitable<db::DbResult<Answer>> Authenticate(const std::string& api_key);

 private:
  struct Flight;
  struct Entry {
    Answer merchant;
    TimePoint expires;
  };
  void Remember(const std::string& hash, const Answer& answer);

  merchants::Authenticator& store_;
  ChargeApiProbe& probe_;
  const ApiKeyCacheOptions options_;
  const Clock clock_;
  std::mutex mutex_;
  LruMap<std::string, Entry> valid_;
  LruMap<std::string, TimePoint> unknown_;
  std::unordered_map<std::string, std::shared_ptr<Flight>> flights_;
};

// What an Authorization header holds, judged by its form alone (no lookup): nothing (absent or blank),
// another scheme, a bearer token that is not an API key's form (1 to 256 visible ASCII characters), or a
// key. The scheme is case-insensitive; spaces around the token are not part of it.
struct BearerCredentials {
  enum class Form { kMissing, kOtherScheme, kMalformedKey, kKey };
  Form form = Form::kMissing;
  std::string key;  // kKey only
};
BearerCredentials ReadBearer(std::optional<std::string_view> authorization);

// The key of "Authorization: Bearer <key>", or nullopt when the header holds no well-formed bearer key.
std::optional<std::string> BearerKey(std::string_view authorization);

}  // namespace charge_outbox::charge_api
