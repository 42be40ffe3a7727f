// A person's decision reaches consumers like any state change: the real charge-admin decides two charges
// in needs_review, the real outbox-relay publishes the events to Kafka, a consumer reads them back with
// the person's name, and the real settlement-projection's totals follow the decisions.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <filesystem>
#include <set>

#include "charge_stack.hpp"
#include "http_test_client.hpp"
#include "kafka_test_topic.hpp"
#include "projection_fixture.hpp"
#include "service_process.hpp"
#include "test_env.hpp"

namespace charge_outbox::testing {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
using namespace std::chrono_literals;
using ::testing::HasSubstr;

constexpr const char* kAcquirerKey = "ak_test_charge_admin_projection";

class ChargeAdminProjectionE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    f_ = std::make_unique<ProjectionE2E>(::testing::UnitTest::GetInstance()->current_test_info()->name());
    merchant_ = f_->AddMerchants(1).front();
    dir_ = fs::temp_directory_path() / UniqueName("charge_admin_projection");
    sim_ = std::make_unique<ServiceProcess>(std::vector<std::string>{ACQUIRER_SIM_BIN},
                                            EnvChanges{{"HTTP_PORT", "0"},
                                                       {"DATA_DIR", (dir_ / "sim").string()},
                                                       {"AUTH_API_KEYS", kAcquirerKey}});
    sim_client_ = std::make_unique<HttpTestClient>(sim_->port());
  }

  void TearDown() override {
    sim_client_.reset();
    sim_.reset();
    fs::remove_all(dir_);
  }

  const PgTestDatabase& db() const { return f_->source_db(); }

  // A charge captured by charge-api, then flagged needs_review because the acquirer contradicted the
  // capture (as the window report or a racing actor does): its three events, as those actors write them.
  std::string CapturedThenContradicted(const std::string& key, const std::string& capture_id) {
    const auto id = db().Scalar(
        "WITH ins AS ("
        " INSERT INTO charges (id, merchant_id, idempotency_key, request_fingerprint, order_id, amount, currency,"
        "  payment_method, last_sequence, attempt_count)"
        " VALUES (gen_random_uuid(), '" + merchant_ + "', '" + key + "', sha256('" + key + "'::bytea), 'ORDER-" +
        key + "', 7700, 'BRL', 'pm_tok_visa', 1, 1) RETURNING *"
        "), ev AS ("
        " INSERT INTO outbox (id, aggregateid, type, payload, sequence, shard)"
        " SELECT gen_random_uuid(), charge_public_id(ins.id), 'payments.charge.initiated.v1',"
        "  charge_event_payload(ROW(ins.*)::charges), 1, outbox_shard(ins.id) FROM ins"
        ") SELECT charge_public_id(id) FROM ins");
    Move(id, "captured", "NULL", "'" + capture_id + "'");
    Move(id, "needs_review", "'acquirer_void_contradicts_captured'", "'" + capture_id + "'");
    return id;
  }

  void Move(const std::string& id, const std::string& status, const std::string& reason, const std::string& capture) {
    db().Execute("WITH upd AS ("
                 " UPDATE charges SET status = '" + status + "', failure_reason = " + reason +
                 ", acquirer_capture_id = " + capture + ", last_sequence = last_sequence + 1, updated_at = now()"
                 " WHERE charge_public_id(id) = '" + id + "' RETURNING *)"
                 " INSERT INTO outbox (id, aggregateid, type, payload, sequence, shard, created_at)"
                 " SELECT gen_random_uuid(), charge_public_id(upd.id), 'payments.charge." + status + ".v1',"
                 " charge_event_payload(ROW(upd.*)::charges), upd.last_sequence, outbox_shard(upd.id), upd.updated_at"
                 " FROM upd");
  }

  std::string AcquirerKey(const std::string& key) const { return merchant_ + ":" + key; }

  // charge-api's capture of the charge at the acquirer, as it sent it; its id.
  std::string CaptureAtAcquirer(const std::string& key, const std::string& id) {
    const auto body = json::serialize(json::object{{"amount", 7700}, {"currency", "BRL"}, {"reference", id},
                                                   {"payment_method", "pm_tok_visa"}});
    const auto r = sim_client_->Post("/v1/captures", body,
                                     {{"Authorization", std::string("Bearer ") + kAcquirerKey},
                                      {"Idempotency-Key", AcquirerKey(key)}});
    EXPECT_EQ(r.status(), 201u) << r.response.body();
    return std::string(r.json().as_object().at("id").as_string());
  }

  void VoidAtAcquirer(const std::string& capture_id) {
    const auto r = sim_client_->Post("/v1/captures/" + capture_id + "/void", "{}",
                                     {{"Authorization", std::string("Bearer ") + kAcquirerKey},
                                      {"Idempotency-Key", "someone-else-voided-it"}});
    EXPECT_EQ(r.status(), 200u) << r.response.body();
  }

  ProcessResult Resolve(const std::string& id, const std::string& to) {
    return RunProcess({CHARGE_ADMIN_BIN, "review", "resolve", id, "--to", to, "--reason", "ticket OPS-7", "--by",
                       "carol"},
                      {{"DATABASE_URL", db().url()},
                       {"ACQUIRER_URL", "http://127.0.0.1:" + std::to_string(sim_->port())},
                       {"ACQUIRER_API_KEY", kAcquirerKey},
                       {"FAILPOINTS", std::nullopt}},
                      60s);
  }

  std::unique_ptr<ProjectionE2E> f_;
  std::string merchant_;
  fs::path dir_;
  std::unique_ptr<ServiceProcess> sim_;
  std::unique_ptr<HttpTestClient> sim_client_;
};

TEST_F(ChargeAdminProjectionE2E, DecisionsArePublishedWithThePersonsNameAndTheProjectionFollowsThem) {
  // One capture the acquirer still holds (a person keeps it captured), one voided behind our back (a
  // person cancels it). Both are in review after a `captured` the projection counted.
  const auto kept = CapturedThenContradicted("keep-1", "cap_pending");
  const auto kept_capture = CaptureAtAcquirer("keep-1", kept);
  db().Execute("UPDATE charges SET acquirer_capture_id = '" + kept_capture + "' WHERE idempotency_key = 'keep-1'");
  const auto gone = CapturedThenContradicted("gone-1", "cap_pending");
  const auto gone_capture = CaptureAtAcquirer("gone-1", gone);
  VoidAtAcquirer(gone_capture);

  auto projection = f_->StartProjection();
  auto relay = f_->DrainOutbox(30s);
  ASSERT_TRUE(f_->WaitCaughtUp(30s)) << projection->Output();

  const auto keep = Resolve(kept, "captured");
  ASSERT_EQ(keep.exit_code, 0) << keep.out << keep.err;
  const auto cancel = Resolve(gone, "canceled");
  ASSERT_EQ(cancel.exit_code, 0) << cancel.out << cancel.err;
  EXPECT_EQ(AcquirerLedgerCount(*sim_client_, "void", AcquirerKey("gone-1")), 0u) << "already voided: no new void";

  // The decisions' events, read back from Kafka as a consumer reads them.
  std::set<std::string> decided;
  const auto messages = ConsumeTopicUntil(
      f_->source().topic().bootstrap_servers(), f_->source().topic().name(),
      [&](const ConsumedMessage& m) {
        if (m.value.find("\"resolution\"") != std::string::npos) decided.insert(m.key);
        return decided.size() == 2;
      },
      30s);
  int decisions = 0;
  for (const auto& m : messages) {
    const auto payload = json::parse(m.value).as_object();
    if (!payload.contains("resolution")) continue;
    ++decisions;
    EXPECT_EQ(payload.at("resolution").as_object().at("operator").as_string(), "carol");
    EXPECT_EQ(m.headers.at("ce_source"), "/charge-outbox/charge-admin");
    if (m.key == kept) {
      EXPECT_EQ(m.headers.at("ce_type"), "payments.charge.captured.v1");
      EXPECT_EQ(payload.at("acquirer_capture_id").as_string(), kept_capture);
    } else {
      EXPECT_EQ(m.headers.at("ce_type"), "payments.charge.canceled.v1");
      EXPECT_EQ(payload.at("sequence").as_int64(), 4);
    }
  }
  EXPECT_EQ(decisions, 2);

  // The projection: the kept charge counted once (back in after its review), the canceled one not at all.
  ASSERT_TRUE(f_->WaitCaughtUp(30s)) << projection->Output();
  f_->ExpectProjectionMatchesSource();
  const auto totals = ProjectionTotals(f_->projection_db());
  Totals all;
  for (const auto& [key, t] : totals) {
    EXPECT_THAT(key, HasSubstr(merchant_));
    all.count += t.count;
    all.amount += t.amount;
  }
  EXPECT_EQ(all, (Totals{1, 7700}));
}

}  // namespace
}  // namespace charge_outbox::testing
