#include "merchant_commands.hpp"

#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include <iomanip>

#include "charge_outbox/db/retry.hpp"

namespace charge_outbox::charge_admin {
namespace {

namespace asio = boost::asio;
namespace json = boost::json;
using merchants::KeyChange;
using merchants::KeyChangeResult;

constexpr int kDone = 0;
constexpr int kNotDone = 1;
// A drawn key whose prefix the merchant already has is drawn again; with 77 random bits in the prefix,
// a second collision means something is wrong with the generator.
constexpr int kDraws = 3;

int DatabaseFailed(MerchantTools& t, const db::DbError& e) {
  t.err << "the database did not answer (" << db::ToString(e.code) << ": " << e.detail << "); nothing changed\n";
  return kNotDone;
}

merchants::Actor ActorOf(const CommandLine& cl) { return {cl.by, cl.reason}; }

std::string KeyState(const merchants::KeyRow& k) {
  if (!k.revoked_at) return "live";
  return (k.live ? "live until " : "revoked ") + *k.revoked_at;
}

json::object KeyJson(const std::string& merchant_id, const merchants::KeyRow& k) {
  json::object o{{"merchant_id", merchant_id}, {"prefix", k.prefix}, {"created_at", k.created_at}, {"live", k.live}};
  if (k.revoked_at) o["revoked_at"] = *k.revoked_at;
  return o;
}

// What a change that did not happen means, for a person. kAlreadyRevoked is no failure: it is so.
int Unchanged(MerchantTools& t, const CommandLine& cl, const KeyChangeResult& r) {
  switch (r.outcome) {
    case KeyChange::kNoSuchMerchant:
      t.err << "no merchant " << *cl.merchant_id << " (merchant list shows them); nothing changed\n";
      return kNotDone;
    case KeyChange::kNoSuchKey:
      t.err << "merchant " << *cl.merchant_id << " has no key " << cl.prefix << " (key list shows its keys); "
            << "nothing changed\n";
      return kNotDone;
    case KeyChange::kAmbiguousPrefix:
      t.err << "several keys of merchant " << *cl.merchant_id << " share the prefix " << cl.prefix
            << " (keys made outside charge-admin); nothing changed. Change them with SQL, or rotate to keys "
            << "issued here\n";
      return kNotDone;
    case KeyChange::kAlreadyRevoked:
      if (cl.command == CommandLine::Command::kKeyRotate) {
        // No new key was made: a rotation of a key already refused, or already rotated, is refused.
        t.err << "key " << cl.prefix << " is " << (r.key ? KeyState(*r.key) : std::string("revoked"))
              << (r.key && r.key->live ? ": it was rotated already and has its successor" : "")
              << "; no key was issued. key issue makes a new one\n";
        return kNotDone;
      }
      t.out << "key " << cl.prefix << " of merchant " << *cl.merchant_id << " is already "
            << (r.key ? KeyState(*r.key) : std::string("revoked")) << "; nothing changed\n";
      return kDone;
    case KeyChange::kPrefixTaken:
      t.err << "could not draw a key with a prefix of its own in " << kDraws << " tries; nothing changed\n";
      return kNotDone;
    case KeyChange::kDone: break;
  }
  return kDone;
}

}  // namespace

asio::awaitable<int> AddMerchant(MerchantTools t, const CommandLine& cl) {
  const auto actor = ActorOf(cl);
  // Not retried: a retry after a lost answer could add the merchant twice.
  const auto added = co_await t.merchants.AddMerchant(cl.name, actor);
  if (!added) {
    // The statement may have committed before its answer was lost: say so, and how to find out.
    t.err << "the database did not answer (" << db::ToString(added.error().code) << ": " << added.error().detail
          << "); the merchant may or may not have been added: merchant list shows it\n";
    co_return kNotDone;
  }
  if (cl.json) {
    t.out << json::serialize(json::object{{"id", added->id}, {"name", added->name}, {"created_at", added->created_at}})
          << "\n";
  } else {
    t.out << added->id << "\n";
    t.err << "merchant " << added->id << " (" << added->name << ") added by " << cl.by
          << "; next: charge-admin key issue --merchant " << added->id << " --reason ... --by ...\n";
  }
  co_return kDone;
}

asio::awaitable<int> ListMerchants(MerchantTools t, const CommandLine& cl) {
  const auto list = [&] { return t.merchants.ListMerchants(); };
  const auto found = co_await db::WithDbRetries(list);
  if (!found) co_return DatabaseFailed(t, found.error());
  if (!cl.json) t.out << std::left << std::setw(38) << "merchant" << std::setw(10) << "live keys" << "created  name\n";
  for (const auto& m : *found) {
    if (cl.json) {
      t.out << json::serialize(json::object{
                   {"id", m.id}, {"name", m.name}, {"created_at", m.created_at}, {"live_keys", m.live_keys}})
            << "\n";
    } else {
      t.out << std::left << std::setw(38) << m.id << std::setw(10) << m.live_keys << m.created_at << "  " << m.name
            << "\n";
    }
  }
  co_return kDone;
}

// Issue or rotate: a key is drawn (again if its prefix is taken) and printed once.
asio::awaitable<int> NewKey(MerchantTools t, const CommandLine& cl) {
  const auto actor = ActorOf(cl);
  const bool rotate = cl.command == CommandLine::Command::kKeyRotate;
  KeyChangeResult result;
  std::string key;
  for (int draw = 0; draw < kDraws; ++draw) {
    auto drawn = t.draw_key();
    const auto change = [&] {
      return rotate ? t.merchants.RotateKey(*cl.merchant_id, cl.prefix, drawn.stored, cl.overlap, actor)
                    : t.merchants.IssueKey(*cl.merchant_id, drawn.stored, actor);
    };
    // Not retried: after a lost answer the key may be stored, and only this process knows it.
    const auto changed = co_await change();
    if (!changed) {
      t.err << "the database did not answer (" << db::ToString(changed.error().code) << ": "
            << changed.error().detail << "); key " << drawn.stored.prefix << " may or may not have been stored"
            << (rotate ? " (and the old key's end set)" : "") << ": key list --merchant " << *cl.merchant_id
            << " shows it. If it is there, revoke it: nobody was given it\n";
      co_return kNotDone;
    }
    result = *changed;
    key = std::move(drawn.key);
    if (result.outcome != KeyChange::kPrefixTaken) break;
  }
  if (result.outcome != KeyChange::kDone) co_return Unchanged(t, cl, result);
  if (cl.json) {
    auto o = KeyJson(*cl.merchant_id, *result.key);
    o["key"] = key;
    t.out << json::serialize(o) << "\n";
  } else {
    t.out << key << "\n";
  }
  t.err << "key " << result.key->prefix << " issued for merchant " << *cl.merchant_id << " by " << cl.by;
  if (rotate) t.err << "; the old key " << cl.prefix << " keeps working for " << cl.overlap.count() / 1000 << " s";
  t.err << ". It is shown once, above, and stored only hashed: hand it over now\n";
  co_return kDone;
}

asio::awaitable<int> ListKeys(MerchantTools t, const CommandLine& cl) {
  const auto list = [&] { return t.merchants.ListKeys(*cl.merchant_id); };
  const auto found = co_await db::WithDbRetries(list);
  if (!found) co_return DatabaseFailed(t, found.error());
  if (!cl.json) t.out << std::left << std::setw(20) << "prefix" << std::setw(26) << "created" << "state\n";
  for (const auto& k : *found) {
    if (cl.json) {
      t.out << json::serialize(KeyJson(*cl.merchant_id, k)) << "\n";
    } else {
      t.out << std::left << std::setw(20) << k.prefix << std::setw(26) << k.created_at << KeyState(k) << "\n";
    }
  }
  co_return kDone;
}

asio::awaitable<int> RevokeKey(MerchantTools t, const CommandLine& cl) {
  const auto actor = ActorOf(cl);
  const auto revoke = [&] { return t.merchants.RevokeKey(*cl.merchant_id, cl.prefix, actor); };
  const auto revoked = co_await db::WithDbRetries(revoke);
  if (!revoked) co_return DatabaseFailed(t, revoked.error());
  if (revoked->outcome != KeyChange::kDone) co_return Unchanged(t, cl, *revoked);
  t.out << "key " << cl.prefix << " of merchant " << *cl.merchant_id << " revoked by " << cl.by
        << " (" << KeyState(*revoked->key) << "); charge-api may still accept it for up to auth.cache_ttl "
        << "(30s unless configured)\n";
  co_return kDone;
}

}  // namespace charge_outbox::charge_admin
