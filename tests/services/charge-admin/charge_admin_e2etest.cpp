// charge-admin as a person runs it: the real binary against a real PostgreSQL and the real acquirer-sim,
// with the real reconciler putting charges in needs_review. Each decision asks the acquirer first, lands
// with its event and audit row or changes nothing, and two people deciding at once end with one decision.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <filesystem>
#include <future>
#include <sstream>
#include <thread>

#include "charge_outbox/util/time.hpp"
#include "charge_stack.hpp"
#include "http_test_client.hpp"
#include "pg_test_database.hpp"
#include "service_process.hpp"
#include "test_env.hpp"
#include "window_report.hpp"

namespace charge_outbox::testing {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kMerchant = "00000000-0000-4000-8000-000000000001";
constexpr const char* kApiKey = "sk_test_charge_admin_e2e";
constexpr const char* kAcquirerKey = "ak_test_charge_admin_e2e";

class ChargeAdminE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = PgTestDatabase::Create(::testing::UnitTest::GetInstance()->current_test_info()->name(),
                                 PgTestDatabase::Schema::kMigrated);
    InsertMerchant(*db_, kMerchant, kApiKey);
    dir_ = fs::temp_directory_path() / UniqueName("charge_admin_e2e");
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

  EnvChanges Env() {
    return {{"DATABASE_URL", db_->url()},
            {"ACQUIRER_URL", "http://127.0.0.1:" + std::to_string(sim_->port())},
            {"ACQUIRER_API_KEY", kAcquirerKey},
            {"ACQUIRER_REQUEST_TIMEOUT", "1s"},
            {"ACQUIRER_RETRY_MAX_ATTEMPTS", "2"},
            {"ACQUIRER_RETRY_BACKOFF_BASE", "50ms"},
            {"ACQUIRER_RETRY_BACKOFF_MAX", "100ms"},
            {"ACQUIRER_RETRY_BACKOFF_BUDGET", "1s"},
            {"FAILPOINTS", std::nullopt}};
  }

  ProcessResult Admin(std::vector<std::string> args) {
    args.insert(args.begin(), CHARGE_ADMIN_BIN);
    return RunProcess(args, Env(), 60s);
  }

  ProcessResult Resolve(const std::string& id, const std::string& to, const std::string& by = "alice",
                        std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"review", "resolve", id, "--to", to, "--reason", "ticket OPS-42", "--by", by};
    args.insert(args.end(), extra.begin(), extra.end());
    return Admin(args);
  }

  ProcessResult Reconcile(const EnvChanges& extra = {}, std::vector<std::string> args = {}) {
    auto env = Env();
    for (const auto& [k, v] : std::initializer_list<std::pair<std::string, std::string>>{
             {"RECONCILER_GRACE_PERIOD", "1s"},
             {"RECONCILER_CLAIM_LEASE", "4s"},
             {"RECONCILER_BACKOFF_BASE", "100ms"},
             {"RECONCILER_BACKOFF_MAX", "200ms"},
             {"RECONCILER_VISIBILITY_WINDOW", "1s"}}) {
      env[k] = v;
    }
    env["METRICS_PUSHGATEWAY_URL"] = std::nullopt;
    for (const auto& [k, v] : extra) env[k] = v;
    args.insert(args.begin(), RECONCILER_BIN);
    return RunProcess(args, env, 60s);
  }

  // A charge charge-api left pending (its intent, its initiated event, attempt 1 answered unknown, so a
  // client may have been told 202), created `age` ago.
  std::string Pending(const std::string& key, const std::string& age) {
    return db_->Scalar(
        "WITH ins AS ("
        " INSERT INTO charges (id, merchant_id, idempotency_key, request_fingerprint, order_id, amount, currency,"
        "  payment_method, last_sequence, attempt_count, created_at, updated_at)"
        " VALUES (gen_random_uuid(), '" + std::string(kMerchant) + "', '" + key + "', sha256('" + key + "'::bytea),"
        "  'ORDER-" + key + "', 4200, 'BRL', 'pm_tok_visa', 1, 1, now() - interval '" + age + "',"
        "  now() - interval '" + age + "') RETURNING *"
        "), ev AS ("
        " INSERT INTO outbox (id, aggregateid, type, payload, sequence, shard)"
        " SELECT gen_random_uuid(), charge_public_id(ins.id), 'payments.charge.initiated.v1',"
        "  charge_event_payload(ROW(ins.*)::charges), 1, outbox_shard(ins.id) FROM ins"
        "), att AS ("
        " INSERT INTO acquirer_attempts (charge_id, attempt_no, request_id, operation, actor, started_at,"
        "  finished_at, outcome, evidence)"
        " SELECT ins.id, 1, gen_random_uuid(), 'capture', 'charge-api', ins.created_at,"
        "  ins.created_at + interval '1 second', 'timed_out', 'unknown' FROM ins"
        ") SELECT charge_public_id(id) FROM ins");
  }

  std::string Field(const std::string& id, const std::string& column) {
    return db_->Scalar("SELECT " + column + " FROM charges WHERE charge_public_id(id) = '" + id + "'");
  }
  std::string Status(const std::string& id) { return Field(id, "status"); }
  std::string Events(const std::string& id) {
    return db_->Scalar("SELECT string_agg(type || '/' || COALESCE(producer, '-'), ',' ORDER BY sequence) FROM outbox"
                       " WHERE aggregateid = '" + id + "' AND sequence > 1");
  }
  std::string Audit(const std::string& id) {
    return db_->Scalar("SELECT string_agg(operator || '|' || before || '|' || after || '|' || against_acquirer, ','"
                       " ORDER BY id) FROM operator_actions WHERE subject = '" + id + "'");
  }
  std::string AcquirerKey(const std::string& id) {
    return std::string(kMerchant) + ":" + Field(id, "idempotency_key");
  }

  json::object CaptureAtAcquirer(const std::string& id) { return CaptureUnder(id, AcquirerKey(id)); }
  // A capture at the acquirer under any reference and key, as charge-api (or anyone) would make it.
  json::object CaptureUnder(const std::string& reference, const std::string& key) {
    const auto body = json::serialize(json::object{{"amount", 4200}, {"currency", "BRL"}, {"reference", reference},
                                                   {"payment_method", "pm_tok_visa"}});
    const auto r = sim_client_->Post("/v1/captures", body,
                                     {{"Authorization", std::string("Bearer ") + kAcquirerKey},
                                      {"Idempotency-Key", key}});
    EXPECT_EQ(r.status(), 201u) << r.response.body();
    return r.json().as_object();
  }
  // What the acquirer's lookup by key shows now: the capture's status, or the HTTP status.
  std::string AtAcquirer(const std::string& key) {
    const auto r = sim_client_->Get("/v1/captures?idempotency_key=" + key,
                                    {{"Authorization", std::string("Bearer ") + kAcquirerKey}});
    if (r.status() != 200u) return "HTTP " + std::to_string(r.status());
    return std::string(r.json().at("status").as_string());
  }
  // The real window report over [from, to), run once the window has settled (visibility window 1 s).
  WindowReport RunWindowReport(std::chrono::system_clock::time_point from, std::chrono::system_clock::time_point to) {
    std::this_thread::sleep_until(to + 1100ms);
    const auto run = Reconcile({}, {"window", "--from", util::FormatRfc3339(from), "--to", util::FormatRfc3339(to)});
    EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
    return ParseWindowReport(run.out);
  }
  std::string OrphanAudit(const std::string& subject) {
    return db_->Scalar("SELECT string_agg(operator || '|' || action || '|' || before || '|' || after, ',' ORDER BY id)"
                       " FROM operator_actions WHERE subject = '" + subject + "'");
  }

  void SetFaults(const std::string& profile) {
    const auto r = sim_client_->Put("/admin/faults", profile);
    ASSERT_EQ(r.status(), 200u) << r.response.body();
  }

  // A charge past its deadline whose capture the acquirer holds but would not show: the reconciler hands
  // it to a person (deadline_passed_unconfirmed).
  std::string ReviewWithALiveCapture(const std::string& key) {
    const auto id = Pending(key, "2 hours");
    CaptureAtAcquirer(id);
    SetFaults(R"({"error_rate": 1.0, "retry_after_s": 0, "apply_to": ["lookup"]})");
    Reconcile();
    SetFaults("{}");
    EXPECT_EQ(Status(id), "needs_review");
    EXPECT_EQ(Field(id, "failure_reason"), "deadline_passed_unconfirmed");
    return id;
  }

  std::unique_ptr<PgTestDatabase> db_;
  fs::path dir_;
  std::unique_ptr<ServiceProcess> sim_;
  std::unique_ptr<HttpTestClient> sim_client_;
};

TEST_F(ChargeAdminE2E, AChargePastItsDeadlineIsFoundShownAndCanceledByVoidingItsLiveCapture) {
  const auto id = ReviewWithALiveCapture("late-1");

  const auto list = Admin({"review", "list", "--json"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  const auto row = json::parse(list.out.substr(0, list.out.find('\n'))).as_object();
  EXPECT_EQ(row.at("id").as_string(), id);
  EXPECT_EQ(row.at("failure_reason").as_string(), "deadline_passed_unconfirmed");

  const auto show = Admin({"review", "show", id});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_THAT(show.out, HasSubstr("request: idempotency key late-1"));
  EXPECT_THAT(show.out, HasSubstr("lookup attempt"));
  EXPECT_THAT(show.out, HasSubstr("payments.charge.needs_review.v1"));
  EXPECT_THAT(show.out, HasSubstr("the acquirer now: a live capture"));
  EXPECT_THAT(show.out + show.err, Not(HasSubstr("pm_tok"))) << "a card token is never printed";

  // failed would say no money was taken while the acquirer holds a live capture: refused, nothing changed.
  const auto refused = Resolve(id, "failed");
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.err, HasSubstr("refused"));
  EXPECT_THAT(refused.err, HasSubstr("a live capture"));
  EXPECT_EQ(Status(id), "needs_review");
  EXPECT_EQ(Audit(id), "");

  const auto canceled = Resolve(id, "canceled");
  ASSERT_EQ(canceled.exit_code, 0) << canceled.err;
  EXPECT_THAT(canceled.out, HasSubstr("-> canceled by alice"));
  EXPECT_EQ(Status(id), "canceled");
  EXPECT_EQ(Field(id, "failure_reason"), "operator_decision");
  EXPECT_EQ(AcquirerLedgerCount(*sim_client_, "void", AcquirerKey(id)), 1u);
  EXPECT_EQ(Events(id), "payments.charge.needs_review.v1/reconciler,payments.charge.canceled.v1/charge-admin");
  EXPECT_EQ(db_->Scalar("SELECT payload->'resolution'->>'operator' FROM outbox WHERE aggregateid = '" + id +
                        "' AND type = 'payments.charge.canceled.v1'"),
            "alice");
  EXPECT_EQ(Audit(id), "alice|needs_review (deadline_passed_unconfirmed)|canceled|false");
  EXPECT_THAT(db_->Scalar("SELECT acquirer_said FROM operator_actions"), HasSubstr("voided by this decision"));

  // The same decision again changes nothing and says so.
  const auto again = Resolve(id, "canceled", "bob");
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_THAT(again.out, HasSubstr("already canceled"));
  EXPECT_EQ(Audit(id), "alice|needs_review (deadline_passed_unconfirmed)|canceled|false");
  EXPECT_EQ(AcquirerLedgerCount(*sim_client_, "void", AcquirerKey(id)), 1u);
  // Another decision on a settled charge: refused, with what settled it.
  const auto other = Resolve(id, "captured", "bob");
  EXPECT_EQ(other.exit_code, 1);
  EXPECT_THAT(other.err, HasSubstr("not in needs_review (canceled by alice"));
}

TEST_F(ChargeAdminE2E, NotFoundUnderTheReviewPolicyIsResolvedFailedAndACapturedTheAcquirerContradictsIsRefused) {
  const auto id = Pending("nf-1", "1 minute");
  for (int run = 0; run < 20 && Status(id) == "pending"; ++run) {
    Reconcile({{"RECONCILER_NOT_FOUND_POLICY", "review"}});
    db_->Execute("UPDATE charges SET next_check_at = now() WHERE status = 'pending'");
    std::this_thread::sleep_for(300ms);
  }
  ASSERT_EQ(Status(id), "needs_review");
  ASSERT_EQ(Field(id, "failure_reason"), "not_found_at_acquirer");

  const auto captured = Resolve(id, "captured");
  EXPECT_EQ(captured.exit_code, 1);
  EXPECT_THAT(captured.err, HasSubstr("captured needs a live capture"));
  // Against the acquirer, a captured still needs a capture to name: there is none.
  const auto forced = Resolve(id, "captured", "alice", {"--against-acquirer", "the acquirer's support says so"});
  EXPECT_EQ(forced.exit_code, 1);
  EXPECT_THAT(forced.err, HasSubstr("none is known"));
  EXPECT_EQ(Status(id), "needs_review");

  const auto failed = Resolve(id, "failed");
  ASSERT_EQ(failed.exit_code, 0) << failed.err;
  EXPECT_EQ(Status(id), "failed");
  EXPECT_EQ(db_->Scalar("SELECT (payload->>'failure_reason') || ' ' || (payload->'resolution'->>'decided_by') FROM "
                        "outbox WHERE aggregateid = '" + id + "' AND type = 'payments.charge.failed.v1'"),
            "operator_decision operator");
  EXPECT_EQ(AcquirerLedgerCount(*sim_client_, "capture", AcquirerKey(id)), 0u) << "nothing was captured";
}

TEST_F(ChargeAdminE2E, AContradictionIsDecidedAgainstTheAcquirerOnlyWithTheOverrideAndItsReasonOnRecord) {
  const auto id = Pending("contra-1", "1 minute");
  CaptureAtAcquirer(id);
  db_->Execute("UPDATE charges SET status = 'needs_review', failure_reason = 'acquirer_capture_contradicts_failed'");

  const auto refused = Resolve(id, "failed");
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.err, HasSubstr("--against-acquirer"));

  const auto overridden =
      Resolve(id, "failed", "alice", {"--against-acquirer", "refunded outside the product, see REF-9"});
  ASSERT_EQ(overridden.exit_code, 0) << overridden.err;
  EXPECT_EQ(Status(id), "failed");
  EXPECT_EQ(Audit(id), "alice|needs_review (acquirer_capture_contradicts_failed)|failed|true");
  EXPECT_THAT(db_->Scalar("SELECT reason || ' / ' || acquirer_said FROM operator_actions"),
              HasSubstr("refunded outside the product, see REF-9"));
  EXPECT_THAT(db_->Scalar("SELECT acquirer_said FROM operator_actions"), HasSubstr("a live capture"));
}

// The contradictions the reconciler's window report finds, both ways: a charge it failed whose capture
// turned up at the acquirer, and a captured charge whose capture someone voided behind our back. Each is
// flagged by the real report and decided by a person with the acquirer's current answer.
TEST_F(ChargeAdminE2E, TheWindowReportsContradictionsBothWaysAreDecidedAsTheAcquirerNowShows) {
  const auto from = std::chrono::system_clock::now() - 1s;
  const auto failed = Pending("win-failed-1", "1 minute");
  const auto captured = Pending("win-captured-1", "1 minute");
  const auto capture = CaptureAtAcquirer(captured);
  // The reconciler settles both as the acquirer shows them then: one captured, one not found (fail policy).
  for (int run = 0; run < 20 && (Status(failed) == "pending" || Status(captured) == "pending"); ++run) {
    Reconcile({{"RECONCILER_NOT_FOUND_POLICY", "fail"}});
    db_->Execute("UPDATE charges SET next_check_at = now() WHERE status = 'pending'");
    std::this_thread::sleep_for(300ms);
  }
  ASSERT_EQ(Status(failed), "failed");
  ASSERT_EQ(Status(captured), "captured");
  // Then the acquirer says otherwise: the failed charge's capture shows up; the captured one's is voided.
  CaptureAtAcquirer(failed);
  const auto voided = sim_client_->Post("/v1/captures/" + std::string(capture.at("id").as_string()) + "/void", "{}",
                                        {{"Authorization", std::string("Bearer ") + kAcquirerKey},
                                         {"Idempotency-Key", "someone-else"}});
  ASSERT_EQ(voided.status(), 200u) << voided.response.body();
  const auto to = std::chrono::system_clock::now() + 1ms;
  std::this_thread::sleep_until(to + 1100ms);  // the window settles (visibility window 1 s)
  const auto report = Reconcile({}, {"window", "--from", util::FormatRfc3339(from), "--to", util::FormatRfc3339(to)});
  ASSERT_EQ(report.exit_code, 0) << report.out << report.err;
  ASSERT_EQ(Status(failed), "needs_review");
  ASSERT_EQ(Status(captured), "needs_review");
  EXPECT_EQ(Field(failed, "failure_reason"), "window_mismatch");

  const auto wrong = Resolve(failed, "failed");
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_THAT(wrong.err, HasSubstr("a live capture"));
  const auto keep = Resolve(failed, "captured");
  ASSERT_EQ(keep.exit_code, 0) << keep.err;
  EXPECT_EQ(Status(failed), "captured");
  EXPECT_EQ(Events(failed), "payments.charge.failed.v1/reconciler,payments.charge.needs_review.v1/reconciler,"
                            "payments.charge.captured.v1/charge-admin");

  const auto cancel = Resolve(captured, "canceled");
  ASSERT_EQ(cancel.exit_code, 0) << cancel.err;
  EXPECT_EQ(Status(captured), "canceled");
  EXPECT_EQ(AcquirerLedgerCount(*sim_client_, "void", AcquirerKey(captured)), 0u)
      << "the capture was already voided: the decision records it, it does not void again";
  EXPECT_EQ(Audit(captured), "alice|needs_review (window_mismatch)|canceled|false");
}

// void_unconfirmed as the real reconciler produces it: past the deadline it finds the live capture and
// voids it, and the acquirer refuses the void because the capture has settled (acquirer-sim's void
// window). The person cannot cancel it either; the money is kept, and captured lands: the only void on
// record was refused as a request, so it provably took no effect.
TEST_F(ChargeAdminE2E, AVoidTheAcquirerRefusesAfterSettlementGoesToAPersonWhoKeepsTheCapture) {
  const auto id = Pending("settled-1", "2 hours");
  const auto capture = CaptureAtAcquirer(id);
  SetFaults(R"({"void_window_ms": 1})");
  std::this_thread::sleep_for(5ms);
  const auto run = Reconcile();
  ASSERT_EQ(Status(id), "needs_review") << run.out << run.err;
  EXPECT_EQ(Field(id, "failure_reason"), "void_unconfirmed");
  EXPECT_EQ(db_->Scalar("SELECT string_agg(outcome || ' ' || http_status, ',') FROM acquirer_attempts"
                        " WHERE operation = 'void'"),
            "contract_error 422")
      << "a refusal is not retried: the same void gets the same answer";
  EXPECT_EQ(AcquirerLedgerCount(*sim_client_, "void", AcquirerKey(id)), 0u);

  const auto show = Admin({"review", "show", id});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_THAT(show.out, HasSubstr("void attempt"));
  EXPECT_THAT(show.out, HasSubstr("HTTP 422"));
  EXPECT_THAT(show.out, HasSubstr("the acquirer now: a live capture"));

  const auto cancel = Resolve(id, "canceled");
  EXPECT_EQ(cancel.exit_code, 1);
  EXPECT_THAT(cancel.err, HasSubstr("HTTP 422"));
  EXPECT_THAT(cancel.err, HasSubstr("asking again will not change that"));
  EXPECT_EQ(Status(id), "needs_review");
  EXPECT_EQ(AcquirerLedgerCount(*sim_client_, "void", AcquirerKey(id)), 0u);

  const auto keep = Resolve(id, "captured");
  ASSERT_EQ(keep.exit_code, 0) << keep.err;
  EXPECT_EQ(Status(id), "captured");
  EXPECT_EQ(Field(id, "acquirer_capture_id"), std::string(capture.at("id").as_string()));
  EXPECT_EQ(Events(id), "payments.charge.needs_review.v1/reconciler,payments.charge.captured.v1/charge-admin");
  EXPECT_EQ(Audit(id), "alice|needs_review (void_unconfirmed)|captured|false");
}

// A void whose outcome is unknown may still have voided: a captured over it needs the override.
TEST_F(ChargeAdminE2E, ACapturedOverAVoidWhoseOutcomeIsUnknownNeedsTheOverride) {
  const auto id = ReviewWithALiveCapture("void-unknown-1");
  db_->Execute("INSERT INTO acquirer_attempts (charge_id, attempt_no, request_id, operation, actor, started_at,"
               " finished_at, outcome, http_status, evidence) SELECT id, 99, gen_random_uuid(), 'void', 'reconciler',"
               " now(), now(), 'timed_out', NULL, 'unknown' FROM charges");
  db_->Execute("UPDATE charges SET voids_recorded = voids_recorded + 1");
  const auto refused = Resolve(id, "captured");
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.err, HasSubstr("whose outcome is unknown"));
  EXPECT_EQ(Status(id), "needs_review");
  const auto overridden = Resolve(id, "captured", "alice", {"--against-acquirer", "the acquirer confirms no void, OPS-7"});
  ASSERT_EQ(overridden.exit_code, 0) << overridden.err;
  EXPECT_EQ(Audit(id), "alice|needs_review (deadline_passed_unconfirmed)|captured|true");
}

TEST_F(ChargeAdminE2E, TwoPeopleDecidingAtOnceEndWithOneDecisionThatTheAcquirerAgreesWith) {
  for (int round = 0; round < 4; ++round) {
    const auto id = ReviewWithALiveCapture("race-" + std::to_string(round));
    auto alice = std::async(std::launch::async, [&] { return Resolve(id, "captured", "alice"); });
    auto bob = std::async(std::launch::async, [&] { return Resolve(id, "canceled", "bob"); });
    const auto a = alice.get();
    const auto b = bob.get();
    EXPECT_EQ((a.exit_code == 0) + (b.exit_code == 0), 1) << "alice: " << a.out << a.err << "\nbob: " << b.out << b.err;
    const auto& loser = a.exit_code == 0 ? b : a;
    EXPECT_THAT(loser.err, HasSubstr("nothing changed")) << loser.err;
    const auto status = Status(id);
    const auto voids = AcquirerLedgerCount(*sim_client_, "void", AcquirerKey(id));
    // The record and the acquirer agree, whoever won.
    if (status == "captured") {
      EXPECT_EQ(voids, 0u);
    } else {
      EXPECT_EQ(status, "canceled");
      EXPECT_EQ(voids, 1u);
    }
    EXPECT_EQ(db_->Scalar("SELECT count(*) FROM operator_actions WHERE subject = '" + id + "'"), "1");
  }
}

TEST_F(ChargeAdminE2E, ADecisionWithoutANameOrAReasonIsRefusedAndChangesNothing) {
  const auto id = Pending("anon-1", "1 minute");
  db_->Execute("UPDATE charges SET status = 'needs_review', failure_reason = 'not_found_at_acquirer'");
  const auto no_name = Admin({"review", "resolve", id, "--to", "failed", "--reason", "r"});
  EXPECT_EQ(no_name.exit_code, 2);
  EXPECT_THAT(no_name.err, HasSubstr("--by"));
  const auto no_reason = Admin({"review", "resolve", id, "--to", "failed", "--by", "alice"});
  EXPECT_EQ(no_reason.exit_code, 2);
  EXPECT_EQ(Status(id), "needs_review");
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM acquirer_attempts WHERE actor = 'charge-admin'"), "0");

  const auto by_key = Admin({"charge", "find", "--merchant", kMerchant, "--key", "anon-1", "--json"});
  ASSERT_EQ(by_key.exit_code, 0) << by_key.err;
  EXPECT_EQ(json::parse(by_key.out).as_object().at("id").as_string(), id);
  const auto by_order = Admin({"charge", "find", "--merchant", kMerchant, "--order", "ORDER-anon-1"});
  ASSERT_EQ(by_order.exit_code, 0) << by_order.err;
  EXPECT_THAT(by_order.out, HasSubstr(id));
  const auto missing = Admin({"charge", "find", "ch_00000000000000000000000000000000"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("no such charge"));
}

// A capture the acquirer holds under a charge id of ours that no charge has (its record lost), found by the
// real window report and kept for a person; a void the acquirer does not answer is reported as unknown
// (and blocks an adoption, since it may have voided); asked again, the same void is confirmed, the
// acquirer shows the capture voided, and the audit trail has both.
TEST_F(ChargeAdminE2E, ACaptureWithoutALocalRecordFoundByTheWindowReportIsVoidedAtTheAcquirer) {
  const auto from = std::chrono::system_clock::now() - 1s;
  const std::string reference = "ch_" + std::string(32, 'b');
  const std::string key = std::string(kMerchant) + ":lost-1";
  const auto capture = CaptureUnder(reference, key);
  const std::string cap(capture.at("id").as_string());
  const auto report = RunWindowReport(from, std::chrono::system_clock::now() + 1ms);
  ASSERT_EQ(report.discrepancies.size(), 1u) << json::serialize(report.summary);
  const auto& found = report.discrepancies[0];
  EXPECT_EQ(found.at("kind").as_string(), "capture_without_local_record");
  EXPECT_EQ(found.at("reference").as_string(), reference);
  EXPECT_EQ(report.summary.at("orphans_recorded").as_int64(), 1);
  EXPECT_EQ(db_->Scalar("SELECT capture_id || ' ' || idempotency_key || ' ' || reference || ' ' || amount || ' ' ||"
                        " currency || ' ' || status FROM orphan_captures"),
            cap + " " + key + " " + reference + " 4200 BRL open");

  const auto list = Admin({"orphan", "list"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_THAT(list.out, HasSubstr(cap));
  EXPECT_THAT(list.out, HasSubstr("a live capture"));
  EXPECT_THAT(list.out, HasSubstr("1 capture(s) without a charge of ours, open"));
  const auto show = Admin({"orphan", "show", cap});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_THAT(show.out, HasSubstr("the acquirer now: a live capture " + cap));
  EXPECT_THAT(show.out, HasSubstr("orphan adopt " + cap + " --merchant " + kMerchant));
  EXPECT_THAT(show.out, HasSubstr("orphan void " + cap));

  const auto anonymous = Admin({"orphan", "void", cap, "--reason", "OPS-51"});
  EXPECT_EQ(anonymous.exit_code, 2);
  EXPECT_THAT(anonymous.err, HasSubstr("--by"));

  // The acquirer does not answer the void: unknown, said so, on record, and not called done.
  SetFaults(R"({"error_rate": 1.0, "retry_after_s": 0, "apply_to": ["void"]})");
  const auto unanswered = Admin({"orphan", "void", cap, "--reason", "OPS-51: not a sale of ours", "--by", "alice"});
  EXPECT_EQ(unanswered.exit_code, 1);
  EXPECT_THAT(unanswered.err, HasSubstr("may or may not have voided"));
  EXPECT_THAT(unanswered.out, Not(HasSubstr("voided")));
  EXPECT_EQ(AtAcquirer(key), "captured");
  EXPECT_EQ(OrphanAudit(cap), "alice|orphan.void|open|open");
  // A void that may have voided stands in the way of an adoption.
  const auto blocked = Admin({"orphan", "adopt", cap, "--merchant", kMerchant, "--order", "PED-1", "--reason", "r",
                              "--by", "bob"});
  EXPECT_EQ(blocked.exit_code, 1);
  EXPECT_THAT(blocked.err, HasSubstr("a void of it is on record"));
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM charges"), "0");

  SetFaults("{}");
  const auto voided = Admin({"orphan", "void", cap, "--reason", "OPS-51: not a sale of ours", "--by", "alice"});
  ASSERT_EQ(voided.exit_code, 0) << voided.err;
  EXPECT_THAT(voided.out, HasSubstr("voided " + cap));
  EXPECT_EQ(AtAcquirer(key), "voided");
  EXPECT_EQ(AcquirerLedgerCount(*sim_client_, "void", key), 1u) << "under the capture's own key";
  EXPECT_EQ(db_->Scalar("SELECT status || ' ' || resolved_by || ' ' || voids_recorded || ' ' || last_void_outcome"
                        " FROM orphan_captures"),
            "voided alice 2 voided");
  EXPECT_EQ(OrphanAudit(cap), "alice|orphan.void|open|open,alice|orphan.void|open|voided");
  EXPECT_THAT(db_->Scalar("SELECT acquirer_said FROM operator_actions ORDER BY id DESC LIMIT 1"),
              HasSubstr("voided " + cap));

  // Again: nothing sent. An adoption of money given back: refused.
  const auto again = Admin({"orphan", "void", cap, "--reason", "r", "--by", "bob"});
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_THAT(again.out, HasSubstr("already voided by alice"));
  EXPECT_EQ(AcquirerLedgerCount(*sim_client_, "void", key), 1u);
  const auto adopt = Admin({"orphan", "adopt", cap, "--merchant", kMerchant, "--order", "PED-1", "--reason", "r",
                            "--by", "bob"});
  EXPECT_EQ(adopt.exit_code, 1);
  EXPECT_THAT(adopt.err, HasSubstr("the money went back"));
  EXPECT_EQ(Admin({"orphan", "list"}).out.find(cap), std::string::npos) << "a settled one is not open";
  EXPECT_THAT(Admin({"orphan", "list", "--all"}).out, HasSubstr("voided by alice"));
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM operator_actions"), "2");
}

// A capture whose charge's record was lost, that the acquirer will not void any more (settled): the
// refusal is reported as one, and the money, rightly the merchant's, is adopted: the charge is written back
// under its own id and the client's key, captured, with its initiated and captured events and the audit
// row; the next window report matches it.
TEST_F(ChargeAdminE2E, ACaptureWithoutALocalRecordThatCannotBeVoidedIsAdoptedAsTheLostCharge) {
  constexpr const char* kOther = "00000000-0000-4000-8000-000000000002";
  InsertMerchant(*db_, kOther, "sk_test_charge_admin_e2e_other");
  const auto from = std::chrono::system_clock::now() - 1s;
  const std::string reference = "ch_" + std::string(32, 'c');
  const std::string key = std::string(kMerchant) + ":lost-2";
  const auto capture = CaptureUnder(reference, key);
  const std::string cap(capture.at("id").as_string());
  const auto to = std::chrono::system_clock::now() + 1ms;
  const auto report = RunWindowReport(from, to);
  ASSERT_EQ(report.summary.at("orphans_recorded").as_int64(), 1) << json::serialize(report.summary);

  SetFaults(R"({"void_window_ms": 1})");
  const auto refused = Admin({"orphan", "void", cap, "--reason", "OPS-52", "--by", "alice"});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.err, HasSubstr("HTTP 422"));
  EXPECT_THAT(refused.err, HasSubstr("asking again will not change that"));
  EXPECT_EQ(AtAcquirer(key), "captured");
  EXPECT_EQ(db_->Scalar("SELECT status || ' ' || last_void_outcome || ' ' || last_void_http_status FROM orphan_captures"),
            "open contract_error 422");
  SetFaults("{}");

  const auto wrong = Admin({"orphan", "adopt", cap, "--merchant", kOther, "--order", "PED-2", "--reason", "OPS-52",
                            "--by", "alice"});
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_THAT(wrong.err, HasSubstr("is not merchant " + std::string(kOther)));
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM charges"), "0");

  const auto adopted = Admin({"orphan", "adopt", cap, "--merchant", kMerchant, "--order", "PED-2", "--reason",
                              "OPS-52: record lost in the failover", "--by", "alice"});
  ASSERT_EQ(adopted.exit_code, 0) << adopted.err;
  EXPECT_THAT(adopted.out, HasSubstr("adopted " + cap + " as charge " + reference));
  EXPECT_EQ(db_->Scalar("SELECT merchant_id || ' ' || idempotency_key || ' ' || order_id || ' ' || status || ' ' ||"
                        " acquirer_capture_id || ' ' || resolved_by || ' ' || amount || ' ' || currency FROM charges"
                        " WHERE charge_public_id(id) = '" + reference + "'"),
            std::string(kMerchant) + " lost-2 PED-2 captured " + cap + " alice 4200 BRL");
  EXPECT_EQ(db_->Scalar("SELECT string_agg(sequence || ' ' || type || ' ' || producer || ' ' || (payload->>'status'),"
                        " ',' ORDER BY sequence) FROM outbox WHERE aggregateid = '" + reference + "'"),
            "1 payments.charge.initiated.v1 charge-admin pending,2 payments.charge.captured.v1 charge-admin captured");
  EXPECT_EQ(db_->Scalar("SELECT (payload->>'acquirer_capture_id') || ' ' || (payload->'resolution'->>'operator') FROM"
                        " outbox WHERE aggregateid = '" + reference + "' AND sequence = 2"),
            cap + " alice");
  EXPECT_EQ(OrphanAudit(reference), "alice|orphan.adopt|capture_without_local_record " + cap + "|captured");
  EXPECT_EQ(OrphanAudit(cap), "alice|orphan.void|open|open");
  EXPECT_EQ(db_->Scalar("SELECT status || ' ' || charge_public_id(adopted_charge_id) FROM orphan_captures"),
            "adopted " + reference);
  EXPECT_EQ(AcquirerLedgerCount(*sim_client_, "void", key), 0u);

  // The charge's story says who wrote it back; the report over the same window now matches it.
  const auto show = Admin({"review", "show", reference});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_THAT(show.out, HasSubstr("orphan.adopt"));
  const auto after = RunWindowReport(from, to);
  EXPECT_EQ(after.discrepancies.size(), 0u) << json::serialize(after.summary);
  EXPECT_EQ(after.summary.at("matched").as_int64(), 1);

  const auto again = Admin({"orphan", "adopt", cap, "--merchant", kMerchant, "--order", "PED-2", "--reason", "r",
                            "--by", "bob"});
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_THAT(again.out, HasSubstr("already adopted as " + reference + " by alice"));
  const auto void_now = Admin({"orphan", "void", cap, "--reason", "r", "--by", "bob"});
  EXPECT_EQ(void_now.exit_code, 1);
  EXPECT_THAT(void_now.err, HasSubstr("a charge of ours now"));
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM charges"), "1");
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM operator_actions"), "2");
}

}  // namespace
}  // namespace charge_outbox::testing
