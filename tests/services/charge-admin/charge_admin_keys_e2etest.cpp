// A fresh install's first merchant and key, and a key's life, as a person runs them: the real
// charge-admin against a real PostgreSQL, and the real charge-api taking charges with the keys it issued.
// A key is printed once and stored only hashed; a rotation keeps both keys working for the overlap; a
// revoked key is refused once charge-api's cache has forgotten it; every change has its audit row.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

#include <filesystem>
#include <thread>

#include "charge_stack.hpp"
#include "http_test_client.hpp"
#include "pg_test_database.hpp"
#include "service_process.hpp"
#include "test_env.hpp"

namespace charge_outbox::testing {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;

constexpr const char* kAcquirerKey = "ak_test_charge_admin_keys";

class ChargeAdminKeysE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = PgTestDatabase::Create(::testing::UnitTest::GetInstance()->current_test_info()->name(),
                                 PgTestDatabase::Schema::kMigrated);
    dir_ = fs::temp_directory_path() / UniqueName("charge_admin_keys");
    sim_ = std::make_unique<ServiceProcess>(std::vector<std::string>{ACQUIRER_SIM_BIN},
                                            EnvChanges{{"HTTP_PORT", "0"},
                                                       {"DATA_DIR", (dir_ / "sim").string()},
                                                       {"AUTH_API_KEYS", kAcquirerKey}});
    auto env = FastChargeApiEnv(db_->url(), sim_->port(), kAcquirerKey);
    env["AUTH_CACHE_TTL"] = "500ms";
    api_ = std::make_unique<ServiceProcess>(std::vector<std::string>{CHARGE_API_BIN}, env);
    client_ = std::make_unique<HttpTestClient>(api_->port(), "127.0.0.1", 30s);
  }

  void TearDown() override {
    client_.reset();
    api_.reset();
    sim_.reset();
    fs::remove_all(dir_);
  }

  ProcessResult Admin(std::vector<std::string> args) {
    args.insert(args.begin(), CHARGE_ADMIN_BIN);
    return RunProcess(args, {{"DATABASE_URL", db_->url()},
                             {"ACQUIRER_URL", "http://127.0.0.1:" + std::to_string(sim_->port())},
                             {"ACQUIRER_API_KEY", kAcquirerKey},
                             {"FAILPOINTS", std::nullopt}},
                      60s);
  }

  // A charge with this API key: the HTTP status.
  unsigned Charge(const std::string& api_key) {
    const auto body = R"({"amount": 1000, "currency": "BRL", "order_id": "PED-)" + std::to_string(++orders_) +
                      R"(", "payment_method": "pm_tok_visa"})";
    return client_
        ->Post("/v1/charges", body,
               {{"Authorization", "Bearer " + api_key}, {"Idempotency-Key", "order-" + std::to_string(orders_)},
                {"Content-Type", "application/json"}})
        .status();
  }

  // Until charge-api's key cache has forgotten what it knew (AUTH_CACHE_TTL 500 ms, and a margin).
  static void AfterTheCache() { std::this_thread::sleep_for(800ms); }

  static std::string Line(const std::string& out) { return out.substr(0, out.find('\n')); }

  std::unique_ptr<PgTestDatabase> db_;
  fs::path dir_;
  std::unique_ptr<ServiceProcess> sim_;
  std::unique_ptr<ServiceProcess> api_;
  std::unique_ptr<HttpTestClient> client_;
  int orders_ = 0;
};

TEST_F(ChargeAdminKeysE2E, AFreshInstallsFirstMerchantTakesAChargeWithAKeyThatIsRotatedAndRevoked) {
  const auto added = Admin({"merchant", "add", "--name", "Loja Um", "--reason", "onboarding ONB-1", "--by", "alice"});
  ASSERT_EQ(added.exit_code, 0) << added.err;
  const auto merchant = Line(added.out);
  ASSERT_THAT(merchant, MatchesRegex("[0-9a-f-]{36}"));

  const auto issued =
      Admin({"key", "issue", "--merchant", merchant, "--reason", "onboarding ONB-1", "--by", "alice"});
  ASSERT_EQ(issued.exit_code, 0) << issued.err;
  const auto first = Line(issued.out);
  ASSERT_THAT(first, MatchesRegex("sk_[0-9A-Za-z]{43}"));
  EXPECT_THAT(issued.err, HasSubstr("shown once"));
  EXPECT_THAT(issued.err, Not(HasSubstr(first))) << "the key is on stdout only";
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM api_keys WHERE key_hash = sha256(convert_to('" + first +
                        "', 'UTF8')) AND key_prefix = '" + first.substr(0, 16) + "'"),
            "1");
  EXPECT_EQ(Charge(first), 201u);

  // Rotated with an overlap: both keys take charges until it ends.
  const auto rotated = Admin({"key", "rotate", "--merchant", merchant, "--prefix", first.substr(0, 16), "--overlap",
                              "3s", "--reason", "yearly rotation", "--by", "bob", "--json"});
  ASSERT_EQ(rotated.exit_code, 0) << rotated.err;
  const auto rotation = json::parse(rotated.out).as_object();
  const std::string second(rotation.at("key").as_string());
  ASSERT_THAT(second, MatchesRegex("sk_[0-9A-Za-z]{43}"));
  EXPECT_EQ(Charge(first), 201u);
  EXPECT_EQ(Charge(second), 201u);

  const auto listed = Admin({"key", "list", "--merchant", merchant});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_THAT(listed.out, HasSubstr(first.substr(0, 16)));
  EXPECT_THAT(listed.out, HasSubstr("live until"));
  EXPECT_THAT(listed.out, Not(HasSubstr(first))) << "a list shows prefixes, never keys";

  // Revoked: refused once the cache has forgotten it; the new key goes on.
  const auto revoked = Admin({"key", "revoke", "--merchant", merchant, "--prefix", first.substr(0, 16), "--reason",
                              "rotation done", "--by", "bob"});
  ASSERT_EQ(revoked.exit_code, 0) << revoked.err;
  AfterTheCache();
  EXPECT_EQ(Charge(first), 401u);
  EXPECT_EQ(Charge(second), 201u);
  const auto again = Admin({"key", "revoke", "--merchant", merchant, "--prefix", first.substr(0, 16), "--reason",
                            "again", "--by", "bob"});
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_THAT(again.out, HasSubstr("already revoked"));

  EXPECT_EQ(db_->Scalar("SELECT string_agg(operator || ' ' || action, ',' ORDER BY id) FROM operator_actions"),
            "alice merchant.add,alice key.issue,bob key.rotate,bob key.revoke");
  const auto merchants = Admin({"merchant", "list", "--json"});
  ASSERT_EQ(merchants.exit_code, 0) << merchants.err;
  EXPECT_EQ(json::parse(merchants.out).as_object().at("live_keys").as_int64(), 1);
}

TEST_F(ChargeAdminKeysE2E, TheOldKeyOfARotationStopsWhenItsOverlapEnds) {
  const auto merchant = Line(Admin({"merchant", "add", "--name", "Loja", "--reason", "r", "--by", "alice"}).out);
  const auto first = Line(Admin({"key", "issue", "--merchant", merchant, "--reason", "r", "--by", "alice"}).out);
  const auto rotated = Admin({"key", "rotate", "--merchant", merchant, "--prefix", first.substr(0, 16), "--overlap",
                              "1s", "--reason", "r", "--by", "alice"});
  ASSERT_EQ(rotated.exit_code, 0) << rotated.err;
  const auto second = Line(rotated.out);
  std::this_thread::sleep_for(1s);
  AfterTheCache();
  EXPECT_EQ(Charge(first), 401u);
  EXPECT_EQ(Charge(second), 201u);
  // The rotated key has its successor: rotating it again is refused and makes no key.
  const auto twice = Admin({"key", "rotate", "--merchant", merchant, "--prefix", first.substr(0, 16), "--reason", "r",
                            "--by", "alice"});
  EXPECT_EQ(twice.exit_code, 1);
  EXPECT_EQ(twice.out, "");
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM api_keys"), "2");
}

TEST_F(ChargeAdminKeysE2E, AChangeWithoutANameOrForAMerchantThatDoesNotExistChangesNothing) {
  const auto anonymous = Admin({"merchant", "add", "--name", "Loja", "--reason", "r"});
  EXPECT_EQ(anonymous.exit_code, 2);
  EXPECT_THAT(anonymous.err, HasSubstr("--by"));
  const auto nobody = Admin({"key", "issue", "--merchant", "00000000-0000-4000-8000-0000000000ff", "--reason", "r",
                             "--by", "alice"});
  EXPECT_EQ(nobody.exit_code, 1);
  EXPECT_THAT(nobody.err, HasSubstr("no merchant"));
  EXPECT_EQ(nobody.out, "") << "no key is printed when none was stored";
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM merchants") + db_->Scalar("SELECT count(*) FROM api_keys") +
                db_->Scalar("SELECT count(*) FROM operator_actions"),
            "000");
}

}  // namespace
}  // namespace charge_outbox::testing
