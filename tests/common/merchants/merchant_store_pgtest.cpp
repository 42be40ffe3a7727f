// PgMerchantStore against a real PostgreSQL with the real schema: a key authenticates only by its hash
// and only while live; every change a person makes lands with its audit row or not at all; a rotation
// leaves both keys working until the overlap ends; a prefix that names several keys changes nothing.
#include <gtest/gtest.h>

#include <thread>

#include "await.hpp"
#include "charge_outbox/merchants/merchant_store.hpp"
#include "charge_outbox/util/sha256.hpp"
#include "pg_test_database.hpp"

namespace charge_outbox::merchants {
namespace {

using namespace std::chrono_literals;
using testing::Await;
using testing::PgTestDatabase;

class MerchantStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = PgTestDatabase::Create(::testing::UnitTest::GetInstance()->current_test_info()->name(),
                                 PgTestDatabase::Schema::kMigrated);
    database_ = std::make_unique<db::Database>(db_->url(), db::DatabaseOptions{.connections = 2});
    store_ = MakePgMerchantStore(*database_);
  }

  static NewKey Key(const std::string& key) { return {util::Sha256(key), key.substr(0, 16)}; }

  std::optional<std::string> WhoseKey(const std::string& key) {
    const auto found = Await(store_->Authenticate(key));
    EXPECT_TRUE(found.has_value());
    if (!found || !*found) return std::nullopt;
    return (*found)->id;
  }

  std::string Audit() {
    return db_->Scalar("SELECT string_agg(operator || '|' || action || '|' || subject || '|' || reason || '|' ||"
                       " coalesce(before, '-') || '|' || coalesce(after, '-'), ',' ORDER BY id) FROM operator_actions");
  }

  const Actor alice_{"alice", "ticket OPS-1"};
  std::unique_ptr<PgTestDatabase> db_;
  std::unique_ptr<db::Database> database_;
  std::unique_ptr<MerchantStore> store_;
};

TEST_F(MerchantStoreTest, AMerchantAndItsKeyAreMadeWithTheirAuditRowsAndTheKeyAuthenticatesByItsHashAlone) {
  const auto merchant = Await(store_->AddMerchant("Loja Um", alice_));
  ASSERT_TRUE(merchant.has_value());
  EXPECT_EQ(merchant->name, "Loja Um");
  const auto issued = Await(store_->IssueKey(merchant->id, Key("sk_AAAAAAAAAAAAA_first_key_secret_part"), alice_));
  ASSERT_TRUE(issued.has_value());
  ASSERT_EQ(issued->outcome, KeyChange::kDone);
  EXPECT_EQ(issued->key->prefix, "sk_AAAAAAAAAAAAA");
  EXPECT_TRUE(issued->key->live);

  EXPECT_EQ(WhoseKey("sk_AAAAAAAAAAAAA_first_key_secret_part"), merchant->id);
  EXPECT_EQ(WhoseKey("sk_AAAAAAAAAAAAA_first_key_secret_parT"), std::nullopt);
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM api_keys WHERE key_prefix LIKE '%secret%'"), "0")
      << "only the prefix is kept in clear";
  EXPECT_EQ(Audit(), "alice|merchant.add|" + merchant->id + "|ticket OPS-1|-|Loja Um,alice|key.issue|" + merchant->id +
                         "|ticket OPS-1|-|sk_AAAAAAAAAAAAA");

  const auto merchants = Await(store_->ListMerchants());
  ASSERT_TRUE(merchants.has_value());
  ASSERT_EQ(merchants->size(), 1u);
  EXPECT_EQ(merchants->front().live_keys, 1);
}

TEST_F(MerchantStoreTest, AKeyForAMerchantThatDoesNotExistOrWithATakenPrefixChangesNothing) {
  const auto nobody = Await(store_->IssueKey("00000000-0000-4000-8000-0000000000ff", Key("sk_BBBBBBBBBBBBB_x"), alice_));
  ASSERT_TRUE(nobody.has_value());
  EXPECT_EQ(nobody->outcome, KeyChange::kNoSuchMerchant);
  const auto merchant = Await(store_->AddMerchant("Loja", alice_)).value();
  ASSERT_EQ(Await(store_->IssueKey(merchant.id, Key("sk_BBBBBBBBBBBBB_one"), alice_))->outcome, KeyChange::kDone);
  EXPECT_EQ(Await(store_->IssueKey(merchant.id, Key("sk_BBBBBBBBBBBBB_two"), alice_))->outcome, KeyChange::kPrefixTaken);
  EXPECT_EQ(WhoseKey("sk_BBBBBBBBBBBBB_two"), std::nullopt);
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM operator_actions WHERE action = 'key.issue'"), "1");
}

TEST_F(MerchantStoreTest, ARotationKeepsBothKeysLiveUntilTheOverlapEndsThenOnlyTheNewOne) {
  const auto merchant = Await(store_->AddMerchant("Loja", alice_)).value();
  ASSERT_EQ(Await(store_->IssueKey(merchant.id, Key("sk_CCCCCCCCCCCCC_old"), alice_))->outcome, KeyChange::kDone);
  const auto rotated =
      Await(store_->RotateKey(merchant.id, "sk_CCCCCCCCCCCCC", Key("sk_DDDDDDDDDDDDD_new"), 1500ms, alice_));
  ASSERT_TRUE(rotated.has_value());
  ASSERT_EQ(rotated->outcome, KeyChange::kDone);
  EXPECT_EQ(rotated->key->prefix, "sk_DDDDDDDDDDDDD");
  EXPECT_EQ(WhoseKey("sk_CCCCCCCCCCCCC_old"), merchant.id);
  EXPECT_EQ(WhoseKey("sk_DDDDDDDDDDDDD_new"), merchant.id);
  // A second rotation of the key on its way out is refused: one successor.
  EXPECT_EQ(Await(store_->RotateKey(merchant.id, "sk_CCCCCCCCCCCCC", Key("sk_EEEEEEEEEEEEE_x"), 1s, alice_))->outcome,
            KeyChange::kAlreadyRevoked);
  EXPECT_EQ(WhoseKey("sk_EEEEEEEEEEEEE_x"), std::nullopt);

  std::this_thread::sleep_for(1600ms);
  EXPECT_EQ(WhoseKey("sk_CCCCCCCCCCCCC_old"), std::nullopt);
  EXPECT_EQ(WhoseKey("sk_DDDDDDDDDDDDD_new"), merchant.id);
  const auto keys = Await(store_->ListKeys(merchant.id)).value();
  ASSERT_EQ(keys.size(), 2u);
  EXPECT_FALSE(keys[0].live);
  EXPECT_TRUE(keys[0].revoked_at.has_value());
  EXPECT_TRUE(keys[1].live);
  EXPECT_NE(Audit().find("alice|key.rotate|" + merchant.id + "|ticket OPS-1|sk_CCCCCCCCCCCCC (refused from "),
            std::string::npos)
      << Audit();
}

TEST_F(MerchantStoreTest, ARevokedKeyIsRefusedAtOnceAndRevokingItAgainSaysSo) {
  const auto merchant = Await(store_->AddMerchant("Loja", alice_)).value();
  ASSERT_EQ(Await(store_->IssueKey(merchant.id, Key("sk_FFFFFFFFFFFFF_k"), alice_))->outcome, KeyChange::kDone);
  const auto revoked = Await(store_->RevokeKey(merchant.id, "sk_FFFFFFFFFFFFF", alice_));
  ASSERT_TRUE(revoked.has_value());
  EXPECT_EQ(revoked->outcome, KeyChange::kDone);
  EXPECT_EQ(WhoseKey("sk_FFFFFFFFFFFFF_k"), std::nullopt);
  const auto again = Await(store_->RevokeKey(merchant.id, "sk_FFFFFFFFFFFFF", alice_));
  EXPECT_EQ(again->outcome, KeyChange::kAlreadyRevoked);
  EXPECT_EQ(Await(store_->RevokeKey(merchant.id, "sk_nope", alice_))->outcome, KeyChange::kNoSuchKey);
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM operator_actions WHERE action = 'key.revoke'"), "1");
}

TEST_F(MerchantStoreTest, APrefixThatNamesSeveralKeysMadeOutsideChargeAdminChangesNothing) {
  const auto merchant = Await(store_->AddMerchant("Loja", alice_)).value();
  // As the local stack's seed and older scripts made them: the prefix is the key's first characters.
  db_->Execute("INSERT INTO api_keys (key_hash, merchant_id, key_prefix) VALUES"
               " (sha256('sk_test_one'::bytea), '" + merchant.id + "', 'sk_test'),"
               " (sha256('sk_test_two'::bytea), '" + merchant.id + "', 'sk_test')");
  EXPECT_EQ(Await(store_->RevokeKey(merchant.id, "sk_test", alice_))->outcome, KeyChange::kAmbiguousPrefix);
  EXPECT_EQ(Await(store_->RotateKey(merchant.id, "sk_test", Key("sk_GGGGGGGGGGGGG_n"), 1s, alice_))->outcome,
            KeyChange::kAmbiguousPrefix);
  EXPECT_EQ(WhoseKey("sk_test_one"), merchant.id);
  EXPECT_EQ(WhoseKey("sk_test_two"), merchant.id);
  EXPECT_EQ(WhoseKey("sk_GGGGGGGGGGGGG_n"), std::nullopt);
}

}  // namespace
}  // namespace charge_outbox::merchants
