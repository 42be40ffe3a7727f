// PgMerchantStore: the SQL of merchants and their keys. Every change is one statement in autocommit that
// also writes its audit row, so there is never a key without the record of who made it.
#include "charge_outbox/merchants/merchant_store.hpp"

#include "charge_outbox/util/sha256.hpp"
#include "charges/pg/charge_sql.hpp"

namespace charge_outbox::merchants {
namespace {

namespace asio = boost::asio;
using db::DbResult;
using db::PgConnection;

// A key is live while revoked_at is unset or still ahead (a rotation's overlap).
#define KEY_LIVE(alias) "(" alias ".revoked_at IS NULL OR " alias ".revoked_at > now())"
#define KEY_COLUMNS(alias)                                                                 \
  alias ".key_prefix, rfc3339(" alias ".created_at), rfc3339(" alias ".revoked_at), " KEY_LIVE(alias) "::int"

constexpr db::Statement kAuthenticate{
    "merchant_authenticate",
    "SELECT k.merchant_id::text FROM api_keys k WHERE k.key_hash = decode($1, 'hex') AND " KEY_LIVE("k")};

// $1 name, $2 operator, $3 reason.
constexpr db::Statement kAddMerchant{
    "merchant_add",
    R"sql(
     WITH m AS (
       INSERT INTO merchants (id, name) VALUES (gen_random_uuid(), $1) RETURNING id, name, created_at
     ), audit AS (
       INSERT INTO operator_actions (operator, action, subject, reason, after)
       SELECT $2, 'merchant.add', m.id::text, $3, m.name FROM m
     ) SELECT m.id::text, m.name, rfc3339(m.created_at), 0 FROM m)sql"};

constexpr db::Statement kListMerchants{
    "merchant_list",
    "SELECT m.id::text, m.name, rfc3339(m.created_at),"
    " (SELECT count(*) FROM api_keys k WHERE k.merchant_id = m.id AND " KEY_LIVE("k") ")::int"
    " FROM merchants m ORDER BY m.created_at, m.id"};

constexpr db::Statement kListKeys{
    "merchant_list_keys",
    "SELECT " KEY_COLUMNS("k") " FROM api_keys k WHERE k.merchant_id = $1::uuid ORDER BY k.created_at, k.key_prefix"};

// $1 merchant, $2 hash (hex), $3 prefix, $4 operator, $5 reason. Nothing when the merchant does not exist
// or already has a key with this prefix (the caller draws another key).
constexpr db::Statement kIssueKey{
    "merchant_issue_key",
    R"sql(
     WITH k AS (
       INSERT INTO api_keys (key_hash, merchant_id, key_prefix)
       SELECT decode($2, 'hex'), m.id, $3 FROM merchants m
        WHERE m.id = $1::uuid
          AND NOT EXISTS (SELECT 1 FROM api_keys o WHERE o.merchant_id = m.id AND o.key_prefix = $3)
       RETURNING *
     ), audit AS (
       INSERT INTO operator_actions (operator, action, subject, reason, after)
       SELECT $4, 'key.issue', k.merchant_id::text, $5, k.key_prefix FROM k
     ) SELECT )sql" KEY_COLUMNS("k") " FROM k"};

// $1 merchant, $2 old prefix, $3 new hash (hex), $4 new prefix, $5 overlap (ms), $6 operator, $7 reason.
// The old key must be live and not already on its way out (revoked_at unset); its row is locked, so two
// rotations of one key at once leave one successor. Returns the new key.
constexpr db::Statement kRotateKey{
    "merchant_rotate_key",
    R"sql(
     WITH old AS (
       UPDATE api_keys SET revoked_at = now() + $5::bigint * interval '1 millisecond'
        WHERE merchant_id = $1::uuid AND key_prefix = $2 AND revoked_at IS NULL
          AND (SELECT count(*) FROM api_keys a WHERE a.merchant_id = $1::uuid AND a.key_prefix = $2) = 1
          AND NOT EXISTS (SELECT 1 FROM api_keys o WHERE o.merchant_id = $1::uuid AND o.key_prefix = $4)
       RETURNING merchant_id, key_prefix, revoked_at
     ), k AS (
       INSERT INTO api_keys (key_hash, merchant_id, key_prefix)
       SELECT decode($3, 'hex'), old.merchant_id, $4 FROM old
       RETURNING *
     ), audit AS (
       INSERT INTO operator_actions (operator, action, subject, reason, before, after)
       SELECT $6, 'key.rotate', k.merchant_id::text, $7,
              old.key_prefix || ' (refused from ' || rfc3339(old.revoked_at) || ')', k.key_prefix
         FROM k, old
     ) SELECT )sql" KEY_COLUMNS("k") " FROM k"};

// $1 merchant, $2 prefix, $3 operator, $4 reason. A key already on its way out (a rotation) is refused now.
constexpr db::Statement kRevokeKey{
    "merchant_revoke_key",
    R"sql(
     WITH k AS (
       UPDATE api_keys SET revoked_at = now()
        WHERE merchant_id = $1::uuid AND key_prefix = $2 AND )sql" KEY_LIVE("api_keys") R"sql(
          AND (SELECT count(*) FROM api_keys a WHERE a.merchant_id = $1::uuid AND a.key_prefix = $2) = 1
       RETURNING *
     ), audit AS (
       INSERT INTO operator_actions (operator, action, subject, reason, before, after)
       SELECT $3, 'key.revoke', k.merchant_id::text, $4, k.key_prefix, 'revoked' FROM k
     ) SELECT )sql" KEY_COLUMNS("k") " FROM k"};

// Why a change did not happen: $1 merchant, $2 prefix. Whether the merchant exists, then the keys with
// this prefix (more than one only for keys made outside charge-admin: a person must tell them apart).
constexpr db::Statement kMerchantExists{"merchant_exists", "SELECT 1 FROM merchants WHERE id = $1::uuid"};
constexpr db::Statement kKeysByPrefix{
    "merchant_keys_by_prefix",
    "SELECT " KEY_COLUMNS("k") " FROM api_keys k WHERE k.merchant_id = $1::uuid AND k.key_prefix = $2"};

constexpr db::Statement kStatements[] = {kAuthenticate, kAddMerchant, kListMerchants,  kListKeys,    kIssueKey,
                                         kRotateKey,    kRevokeKey,   kMerchantExists, kKeysByPrefix};

MerchantRow ReadMerchant(const db::PgRow& row) {
  return {row[0].as<std::string>(), row[1].as<std::string>(), row[2].as<std::string>(), row[3].as<int>()};
}

KeyRow ReadKey(const db::PgRow& row) {
  return {row[0].as<std::string>(), row[1].as<std::string>(), row[2].optional<std::string>(), row[3].as<int>() != 0};
}

std::string HashHex(const charges::Fingerprint& hash) { return util::ToHex(hash.data(), hash.size()); }

class PgMerchantStore final : public MerchantStore {
 public:
  explicit PgMerchantStore(db::Database& database) : pool_(database.pool()) {}

  asio::awaitable<DbResult<std::optional<charges::Merchant>>> Authenticate(const std::string& api_key) override {
    const auto hex = HashHex(charges::HashApiKey(api_key));
    co_return co_await charges::sql::RunJob<std::optional<charges::Merchant>>(
        pool_, [&](PgConnection& conn) -> asio::awaitable<std::optional<charges::Merchant>> {
          const auto r = co_await conn.Execute(kAuthenticate, hex);
          if (r.empty()) co_return std::nullopt;
          co_return charges::Merchant{r[0][0].as<std::string>()};
        });
  }

  asio::awaitable<DbResult<MerchantRow>> AddMerchant(const std::string& name, const Actor& actor) override {
    co_return co_await charges::sql::RunJob<MerchantRow>(pool_, [&](PgConnection& conn) -> asio::awaitable<MerchantRow> {
      const auto r = co_await conn.Execute(kAddMerchant, name, actor.operator_name, actor.reason);
      co_return ReadMerchant(r[0]);
    });
  }

  asio::awaitable<DbResult<std::vector<MerchantRow>>> ListMerchants() override {
    co_return co_await charges::sql::RunJob<std::vector<MerchantRow>>(
        pool_, [&](PgConnection& conn) -> asio::awaitable<std::vector<MerchantRow>> {
          const auto r = co_await conn.Execute(kListMerchants);
          std::vector<MerchantRow> out;
          for (const auto row : r) out.push_back(ReadMerchant(row));
          co_return out;
        });
  }

  asio::awaitable<DbResult<KeyChangeResult>> IssueKey(const std::string& merchant_id, const NewKey& key,
                                                      const Actor& actor) override {
    const auto hex = HashHex(key.hash);
    co_return co_await charges::sql::RunJob<KeyChangeResult>(
        pool_, [&](PgConnection& conn) -> asio::awaitable<KeyChangeResult> {
          const auto r = co_await conn.Execute(kIssueKey, merchant_id, hex, key.prefix, actor.operator_name,
                                               actor.reason);
          if (!r.empty()) co_return KeyChangeResult{KeyChange::kDone, ReadKey(r[0])};
          const auto merchant = co_await conn.Execute(kMerchantExists, merchant_id);
          if (merchant.empty()) co_return KeyChangeResult{KeyChange::kNoSuchMerchant, std::nullopt};
          co_return KeyChangeResult{KeyChange::kPrefixTaken, std::nullopt};
        });
  }

  asio::awaitable<DbResult<std::vector<KeyRow>>> ListKeys(const std::string& merchant_id) override {
    co_return co_await charges::sql::RunJob<std::vector<KeyRow>>(
        pool_, [&](PgConnection& conn) -> asio::awaitable<std::vector<KeyRow>> {
          const auto r = co_await conn.Execute(kListKeys, merchant_id);
          std::vector<KeyRow> out;
          for (const auto row : r) out.push_back(ReadKey(row));
          co_return out;
        });
  }

  asio::awaitable<DbResult<KeyChangeResult>> RotateKey(const std::string& merchant_id, const std::string& old_prefix,
                                                       const NewKey& key, std::chrono::milliseconds overlap,
                                                       const Actor& actor) override {
    const auto hex = HashHex(key.hash);
    const auto overlap_ms = static_cast<std::int64_t>(overlap.count());
    co_return co_await charges::sql::RunJob<KeyChangeResult>(
        pool_, [&](PgConnection& conn) -> asio::awaitable<KeyChangeResult> {
          const auto r = co_await conn.Execute(kRotateKey, merchant_id, old_prefix, hex, key.prefix, overlap_ms,
                                               actor.operator_name, actor.reason);
          if (!r.empty()) co_return KeyChangeResult{KeyChange::kDone, ReadKey(r[0])};
          co_return co_await WhyNot(conn, merchant_id, old_prefix, /*rotation=*/true);
        });
  }

  asio::awaitable<DbResult<KeyChangeResult>> RevokeKey(const std::string& merchant_id, const std::string& prefix,
                                                       const Actor& actor) override {
    co_return co_await charges::sql::RunJob<KeyChangeResult>(
        pool_, [&](PgConnection& conn) -> asio::awaitable<KeyChangeResult> {
          const auto r = co_await conn.Execute(kRevokeKey, merchant_id, prefix, actor.operator_name, actor.reason);
          if (!r.empty()) co_return KeyChangeResult{KeyChange::kDone, ReadKey(r[0])};
          co_return co_await WhyNot(conn, merchant_id, prefix, /*rotation=*/false);
        });
  }

 private:
  // Read after the statement that changed nothing: the merchant or the key is missing, the prefix names
  // several keys, the key is already refused (or on its way out, for a rotation), or the new prefix is
  // taken (a rotation's, when the old key is live).
  static asio::awaitable<KeyChangeResult> WhyNot(PgConnection& conn, const std::string& merchant_id,
                                                 const std::string& prefix, bool rotation) {
    const auto merchant = co_await conn.Execute(kMerchantExists, merchant_id);
    if (merchant.empty()) co_return KeyChangeResult{KeyChange::kNoSuchMerchant, std::nullopt};
    const auto keys = co_await conn.Execute(kKeysByPrefix, merchant_id, prefix);
    if (keys.empty()) co_return KeyChangeResult{KeyChange::kNoSuchKey, std::nullopt};
    if (keys.size() > 1) co_return KeyChangeResult{KeyChange::kAmbiguousPrefix, std::nullopt};
    auto row = ReadKey(keys[0]);
    if (rotation && !row.revoked_at) co_return KeyChangeResult{KeyChange::kPrefixTaken, std::move(row)};
    co_return KeyChangeResult{KeyChange::kAlreadyRevoked, std::move(row)};
  }

  db::PgPool& pool_;
};

}  // namespace

std::unique_ptr<MerchantStore> MakePgMerchantStore(db::Database& database) {
  return std::make_unique<PgMerchantStore>(database);
}

std::vector<charges::StatementText> PgMerchantStoreStatements() {
  std::vector<charges::StatementText> out;
  for (const auto& [name, sql] : kStatements) out.push_back({name, sql});
  return out;
}

}  // namespace charge_outbox::merchants
