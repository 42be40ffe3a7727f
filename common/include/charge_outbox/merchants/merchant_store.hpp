// MerchantStore: merchants and their API keys. charge-api authenticates through it; charge-admin adds
// merchants and issues, rotates and revokes keys through it, each change with its audit row
// (`operator_actions`) in the same statement. Keys are never stored: only their SHA-256 and a prefix that
// names them in a console and is never enough to use them.
//
// It owns `merchants` and `api_keys`.
//
// Thread safety: every method may be called concurrently; each runs on a pooled connection.
#pragma once

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "charge_outbox/charges/charge_store.hpp"
#include "charge_outbox/db/database.hpp"

namespace charge_outbox::merchants {

// Who acts, and why: the audit row's operator and reason.
struct Actor {
  std::string operator_name;
  std::string reason;
};

struct MerchantRow {
  std::string id;  // uuid
  std::string name;
  std::string created_at;  // RFC 3339, as the database printed it
  int live_keys = 0;       // keys that authenticate now
};

struct KeyRow {
  std::string prefix;
  std::string created_at;
  std::optional<std::string> revoked_at;  // set: refused from then (in the future while a rotation overlaps)
  bool live = false;                      // authenticates now
};

// A key to store: its hash and prefix. The key itself stays with the caller, who shows it once.
struct NewKey {
  charges::Fingerprint hash{};
  std::string prefix;
};

// kAmbiguousPrefix: the prefix names several keys (made outside charge-admin); nothing changed.
enum class KeyChange { kDone, kNoSuchMerchant, kNoSuchKey, kAmbiguousPrefix, kAlreadyRevoked, kPrefixTaken };

struct KeyChangeResult {
  KeyChange outcome = KeyChange::kDone;
  std::optional<KeyRow> key;  // the key changed (kDone), or as it stands (kAlreadyRevoked)
};

// What charge-api needs of the merchants: who a key belongs to.
class Authenticator {
 public:
  virtual ~Authenticator() = default;

  // The merchant whose key this is, while the key is live (never revoked, or revoked in the future).
  virtual boost::asio::awaitable<db::DbResult<std::optional<charges::Merchant>>> Authenticate(
      const std::string& api_key) = 0;
};

class MerchantStore : public Authenticator {
 public:

  virtual boost::asio::awaitable<db::DbResult<MerchantRow>> AddMerchant(const std::string& name,
                                                                        const Actor& actor) = 0;
  virtual boost::asio::awaitable<db::DbResult<std::vector<MerchantRow>>> ListMerchants() = 0;

  // A new key for the merchant, live at once.
  virtual boost::asio::awaitable<db::DbResult<KeyChangeResult>> IssueKey(const std::string& merchant_id,
                                                                         const NewKey& key, const Actor& actor) = 0;
  virtual boost::asio::awaitable<db::DbResult<std::vector<KeyRow>>> ListKeys(const std::string& merchant_id) = 0;
  // The new key, live at once, and the old one (by prefix) refused from `overlap` on, in one statement:
  // both work meanwhile. kAlreadyRevoked: the old key is already refused (or already on its way out).
  virtual boost::asio::awaitable<db::DbResult<KeyChangeResult>> RotateKey(const std::string& merchant_id,
                                                                          const std::string& old_prefix,
                                                                          const NewKey& key,
                                                                          std::chrono::milliseconds overlap,
                                                                          const Actor& actor) = 0;
  // Refused from now on (charge-api's cache may still accept it for auth.cache_ttl).
  virtual boost::asio::awaitable<db::DbResult<KeyChangeResult>> RevokeKey(const std::string& merchant_id,
                                                                          const std::string& prefix,
                                                                          const Actor& actor) = 0;
};

std::unique_ptr<MerchantStore> MakePgMerchantStore(db::Database& database);

// The exact SQL of each statement, by name.
std::vector<charges::StatementText> PgMerchantStoreStatements();

}  // namespace charge_outbox::merchants
