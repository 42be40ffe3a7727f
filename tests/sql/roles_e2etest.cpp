// The database roles as a platform team installs them (sql/roles.sql, services/settlement-projection/roles.sql):
// fresh databases owned by an owner role, migrated by `charge-migrate up` and `settlement-projection migrate`
// as that owner, the scripts run with psql; then every daemon at work as its own least-privileged role
// (charge-api takes a charge, the reconciler resolves a pending one, charge-admin issues a key and decides a
// review, the relay runs its partition work and publishes to Kafka, settlement-projection consumes and
// drops an old inbox day), and no runtime role can run DDL.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <pqxx/pqxx>

#include <filesystem>
#include <set>
#include <thread>

#include "charge_outbox/util/sha256.hpp"
#include "charge_outbox/util/time.hpp"
#include "charge_stack.hpp"
#include "child_process.hpp"
#include "http_test_client.hpp"
#include "kafka_test_topic.hpp"
#include "pg_test_database.hpp"
#include "service_process.hpp"
#include "test_env.hpp"
#include "window_report.hpp"

namespace charge_outbox::testing {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
using namespace std::chrono_literals;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::MatchesRegex;
using ::testing::Not;

constexpr const char* kPsql = "/usr/bin/psql";
constexpr const char* kAcquirerKey = "ak_test_roles";

// Roles belong to the cluster, not to a database: this run's own names, dropped at the end.
struct RoleNames {
  explicit RoleNames(const std::string& prefix)
      : owner(prefix + "_owner"),
        api(prefix + "_api"),
        reconciler(prefix + "_reconciler"),
        relay(prefix + "_relay"),
        op(prefix + "_operator"),
        projection_owner(prefix + "_powner"),
        projection(prefix + "_projection") {}
  std::vector<std::string> Runtime() const { return {api, reconciler, relay, op}; }
  std::vector<std::string> All() const { return {owner, api, reconciler, relay, op, projection_owner, projection}; }
  std::string owner, api, reconciler, relay, op, projection_owner, projection;
};

// `url` (the admin's, on some database) as `role`.
std::string As(const std::string& url, const std::string& role) {
  return url + (url.find('?') == std::string::npos ? "?" : "&") + "user=" + role;
}

// The error PostgreSQL answers `sql` with, run as the URL's role; "" when it succeeds.
std::string ErrorOf(const std::string& url, const std::string& sql) {
  try {
    pqxx::connection conn(url);
    pqxx::nontransaction tx(conn);
    tx.exec(sql);
    return "";
  } catch (const pqxx::sql_error& e) {
    return e.what();
  }
}

// 'a', 'b', ...: names of ours (never input), for an IN list.
std::string SqlList(const std::vector<std::string>& names) {
  std::string listed;
  for (const auto& n : names) listed += (listed.empty() ? "'" : ", '") + n + "'";
  return listed;
}

void AdminExecute(const std::string& sql) {
  pqxx::connection conn(TestDatabaseAdminUrl());
  pqxx::nontransaction tx(conn);
  tx.exec(sql);
}

class RolesE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    roles_ = std::make_unique<RoleNames>(UniqueName("ro"));
    AdminExecute("CREATE ROLE " + roles_->owner + " LOGIN; CREATE ROLE " + roles_->projection_owner + " LOGIN");
    charges_ = PgTestDatabase::Create("roles_charges", PgTestDatabase::Schema::kEmpty);
    charges_->ExecuteAsAdmin("ALTER DATABASE " + charges_->name() + " OWNER TO " + roles_->owner);
    projection_ = PgTestDatabase::Create("roles_projection", PgTestDatabase::Schema::kEmpty);
    projection_->ExecuteAsAdmin("ALTER DATABASE " + projection_->name() + " OWNER TO " + roles_->projection_owner);
    topic_ = std::make_unique<KafkaTestTopic>("roles");

    const auto migrated = RunProcess({CHARGE_MIGRATE_BIN, "up"}, {{"DATABASE_URL", As(charges_->url(), roles_->owner)},
                                                                  {"FAILPOINTS", std::nullopt}});
    ASSERT_EQ(migrated.exit_code, 0) << migrated.out << migrated.err;
    const auto projection_migrated = RunProcess({SETTLEMENT_PROJECTION_BIN, "migrate"},
                                                ProjectionEnv(As(projection_->url(), roles_->projection_owner)));
    ASSERT_EQ(projection_migrated.exit_code, 0) << projection_migrated.out << projection_migrated.err;

    const auto granted = RunChargesRolesScript();
    ASSERT_EQ(granted.exit_code, 0) << granted.out << granted.err;
    const auto projection_granted = RunProjectionRolesScript();
    ASSERT_EQ(projection_granted.exit_code, 0) << projection_granted.out << projection_granted.err;
  }

  static void TearDownTestSuite() {
    charges_.reset();
    projection_.reset();
    topic_.reset();
    if (!roles_) return;
    for (const auto& role : roles_->All()) {
      try {
        AdminExecute("DROP ROLE IF EXISTS " + role);
      } catch (const std::exception&) {
        // A role left behind by a failed run harms nothing but the cluster's list.
      }
    }
    roles_.reset();
  }

  static ProcessResult RunChargesRolesScript() {
    return RunProcess({kPsql, charges_->url(), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-v", "owner=" + roles_->owner,
                       "-v", "api_role=" + roles_->api, "-v", "reconciler_role=" + roles_->reconciler, "-v",
                       "relay_role=" + roles_->relay, "-v", "operator_role=" + roles_->op, "-f",
                       std::string(PROJECT_SOURCE_DIR) + "/sql/roles.sql"},
                      {{"CHARGE_API_DB_PASSWORD", "api-secret-1"},
                       {"CHARGE_RECONCILER_DB_PASSWORD", "reconciler-secret-1"},
                       {"OUTBOX_RELAY_DB_PASSWORD", "relay-secret-1"},
                       {"CHARGE_OPERATOR_DB_PASSWORD", "operator-secret-1"}});
  }

  static ProcessResult RunProjectionRolesScript() {
    return RunProcess({kPsql, projection_->url(), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-v",
                       "owner=" + roles_->projection_owner, "-v", "projection_role=" + roles_->projection, "-f",
                       std::string(PROJECT_SOURCE_DIR) + "/services/settlement-projection/roles.sql"},
                      {{"SETTLEMENT_PROJECTION_DB_PASSWORD", "projection-secret-1"}});
  }

  static EnvChanges ProjectionEnv(const std::string& database_url) {
    return {{"DATABASE_URL", database_url},
            {"KAFKA_BOOTSTRAP_SERVERS", topic_->bootstrap_servers()},
            {"KAFKA_TOPIC", topic_->name()},
            {"KAFKA_GROUP_ID", topic_->name() + "_projection"},
            {"HTTP_ADDRESS", "127.0.0.1"},
            {"HTTP_PORT", "0"},
            {"ADMIN_ADDRESS", "127.0.0.1"},
            {"ADMIN_PORT", "0"},
            {"HTTP_TOKEN_HASHES", util::Sha256Hex("roles-e2e-projection-token")},
            {"INBOX_SWEEP_INTERVAL", "100ms"},
            {"SHUTDOWN_DEADLINE", "5s"},
            {"FAILPOINTS", std::nullopt}};
  }

  static EnvChanges RelayEnv() {
    return {{"DATABASE_URL", As(charges_->url(), roles_->relay)},
            {"KAFKA_BOOTSTRAP_SERVERS", topic_->bootstrap_servers()},
            {"KAFKA_TOPIC", topic_->name()},
            {"ADMIN_ADDRESS", "127.0.0.1"},
            {"ADMIN_PORT", "0"},
            {"RELAY_POLL_INTERVAL", "1s"},
            {"RELAY_REBALANCE_INTERVAL", "200ms"},
            {"METRICS_REFRESH_INTERVAL", "100ms"},
            {"SHUTDOWN_DEADLINE", "10s"},
            {"FAILPOINTS", std::nullopt}};
  }

  EnvChanges AcquirerEnv(const std::string& role) const {
    return {{"DATABASE_URL", As(charges_->url(), role)},
            {"ACQUIRER_URL", "http://127.0.0.1:" + std::to_string(sim_->port())},
            {"ACQUIRER_API_KEY", kAcquirerKey},
            {"FAILPOINTS", std::nullopt}};
  }

  ProcessResult Admin(std::vector<std::string> args) const {
    args.insert(args.begin(), CHARGE_ADMIN_BIN);
    return RunProcess(args, AcquirerEnv(roles_->op), 60s);
  }

  // outbox_YYYYMMDD of the UTC day `offset` days from today.
  static std::string Day(int offset) {
    return "outbox_" + charges_->Scalar("SELECT to_char((now() AT TIME ZONE 'UTC')::date + " + std::to_string(offset) +
                                        ", 'YYYYMMDD')");
  }

  // Relations of the schema (partitions of a day and identity sequences aside) on which no runtime role of
  // `roles` holds any privilege: a table a migration added without its line in the roles script.
  static std::string WithoutGrants(const PgTestDatabase& db, const std::vector<std::string>& roles) {
    const auto listed = SqlList(roles);
    return db.Scalar(
        "SELECT string_agg(c.relname, ' ' ORDER BY c.relname) FROM pg_class c"
        " WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p', 'S', 'v', 'm')"
        "   AND c.relname !~ '_[0-9]{8}$'"
        "   AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid"
        "                    AND d.deptype = 'i')"
        "   AND NOT EXISTS (SELECT 1 FROM aclexplode(c.relacl) a JOIN pg_roles r ON r.oid = a.grantee"
        "                    WHERE r.rolname IN (" + listed + "))");
  }

  // SECURITY DEFINER functions of the schema that some role outside `allowed` may call, or whose
  // search_path is not pinned: each as "name: why".
  static std::string LooseDefinerFunctions(const PgTestDatabase& db, const std::vector<std::string>& allowed) {
    const auto listed = SqlList(allowed);
    return db.Scalar(
        "SELECT string_agg(p.proname || ': ' || why, '; ' ORDER BY p.proname) FROM pg_proc p,"
        " LATERAL (SELECT 'search_path not pinned' AS why"
        "           WHERE NOT COALESCE(p.proconfig::text[] @> ARRAY['search_path=pg_catalog, public, pg_temp'], false)"
        "          UNION ALL SELECT 'EXECUTE to PUBLIC (no ACL)' WHERE p.proacl IS NULL"
        "          UNION ALL SELECT 'EXECUTE to ' || COALESCE(r.rolname, 'PUBLIC') FROM aclexplode(p.proacl) a"
        "            LEFT JOIN pg_roles r ON r.oid = a.grantee"
        "           WHERE a.privilege_type = 'EXECUTE' AND COALESCE(r.rolname, 'PUBLIC') NOT IN (" + listed + ")) w"
        " WHERE p.prosecdef AND p.pronamespace = 'public'::regnamespace");
  }

  void StartAcquirer() {
    dir_ = fs::temp_directory_path() / UniqueName("roles");
    sim_ = std::make_unique<ServiceProcess>(std::vector<std::string>{ACQUIRER_SIM_BIN},
                                            EnvChanges{{"HTTP_PORT", "0"},
                                                       {"DATA_DIR", (dir_ / "sim").string()},
                                                       {"AUTH_API_KEYS", kAcquirerKey}});
    sim_client_ = std::make_unique<HttpTestClient>(sim_->port());
  }

  void TearDown() override {
    sim_client_.reset();
    sim_.reset();
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  static std::unique_ptr<RoleNames> roles_;
  static std::unique_ptr<PgTestDatabase> charges_;
  static std::unique_ptr<PgTestDatabase> projection_;
  static std::unique_ptr<KafkaTestTopic> topic_;
  fs::path dir_;
  std::unique_ptr<ServiceProcess> sim_;
  std::unique_ptr<HttpTestClient> sim_client_;
};

std::unique_ptr<RoleNames> RolesE2E::roles_;
std::unique_ptr<PgTestDatabase> RolesE2E::charges_;
std::unique_ptr<PgTestDatabase> RolesE2E::projection_;
std::unique_ptr<KafkaTestTopic> RolesE2E::topic_;

TEST_F(RolesE2E, TheScriptsAreIdempotentAndEveryTableHasItsGrantsAndEveryOwnersFunctionItsCallers) {
  // Run again, as after an upgrade: nothing fails, nothing changes.
  const auto again = RunChargesRolesScript();
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_THAT(again.out + again.err, Not(HasSubstr("secret"))) << "a password is never printed";
  const auto projection_again = RunProjectionRolesScript();
  ASSERT_EQ(projection_again.exit_code, 0) << projection_again.err;

  // A migration that adds a table without adding its grants fails here.
  EXPECT_EQ(WithoutGrants(*charges_, roles_->Runtime()), "");
  EXPECT_EQ(WithoutGrants(*projection_, {roles_->projection}), "");
  // The owner's functions: pinned search_path, callable by the owner and the one role that needs them.
  EXPECT_EQ(LooseDefinerFunctions(*charges_, {roles_->owner, roles_->relay}), "");
  EXPECT_EQ(LooseDefinerFunctions(*projection_, {roles_->projection_owner, roles_->projection}), "");
  EXPECT_EQ(charges_->Scalar("SELECT count(*) FROM pg_proc WHERE prosecdef AND pronamespace = 'public'::regnamespace"),
            "4");

  // Login, and nothing more; passwords from the environment, stored as SCRAM verifiers.
  auto login_roles = roles_->Runtime();
  login_roles.push_back(roles_->projection);
  const auto runtime = SqlList(login_roles);
  EXPECT_EQ(charges_->Scalar("SELECT count(*) FROM pg_roles WHERE rolname IN (" + runtime + ") AND rolcanlogin"
                             " AND NOT (rolsuper OR rolcreaterole OR rolcreatedb OR rolreplication OR rolbypassrls)"),
            "5");
  EXPECT_EQ(charges_->Scalar("SELECT count(*) FROM pg_authid WHERE rolname IN (" + runtime +
                             ") AND rolpassword LIKE 'SCRAM-SHA-256$%'"),
            "5");
  // Every object is the owner's.
  EXPECT_EQ(charges_->Scalar("SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace"
                             " AND relowner <> '" + roles_->owner + "'::regrole"),
            "0");
}

TEST_F(RolesE2E, ARuntimeRoleCannotRunDdlNorCallTheOwnersFunctionsBeyondTheirPurpose) {
  for (const auto& role : roles_->Runtime()) {
    const auto url = As(charges_->url(), role);
    EXPECT_THAT(ErrorOf(url, "DROP TABLE charges"), HasSubstr("must be owner of table charges")) << role;
    EXPECT_THAT(ErrorOf(url, "ALTER TABLE outbox DETACH PARTITION outbox_default"),
                HasSubstr("must be owner of table outbox"))
        << role;
    EXPECT_THAT(ErrorOf(url, "CREATE TABLE mine (a int)"), HasSubstr("permission denied for schema public")) << role;
    EXPECT_THAT(ErrorOf(url, "CREATE TEMP TABLE outbox_default (a int)"),
                HasSubstr("permission denied to create temporary tables"))
        << role;
    EXPECT_THAT(ErrorOf(url, "TRUNCATE operator_actions"), HasSubstr("permission denied for table operator_actions"))
        << role;
  }
  for (const auto& role : {roles_->api, roles_->reconciler, roles_->op}) {
    EXPECT_THAT(ErrorOf(As(charges_->url(), role), "SELECT outbox_ensure_partitions(current_date, current_date)"),
                HasSubstr("permission denied for function outbox_ensure_partitions"))
        << role;
  }
  EXPECT_THAT(ErrorOf(As(charges_->url(), roles_->api), "DELETE FROM operator_actions"),
              HasSubstr("permission denied for table operator_actions"));
  EXPECT_THAT(ErrorOf(As(charges_->url(), roles_->relay), "UPDATE charges SET status = 'failed'"),
              HasSubstr("permission denied for table charges"));

  // The relay's functions take a day table of the right parent and age, nothing else.
  const auto relay = As(charges_->url(), roles_->relay);
  EXPECT_THAT(ErrorOf(relay, "SELECT outbox_retire_day('charges', true)"),
              HasSubstr("charges is not a day table under outbox"));
  EXPECT_THAT(ErrorOf(relay, "SELECT outbox_retire_day('" + Day(0) + "', true)"),
              HasSubstr("may still be written to"));
  EXPECT_THAT(ErrorOf(relay, "SELECT outbox_trim_day_ahead('" + Day(1) + "')"),
              HasSubstr("is not at least two days ahead"));
  EXPECT_THAT(ErrorOf(relay, "SELECT outbox_drop_history_day('outbox_default')"),
              HasSubstr("outbox_default is not a day table under outbox_history"));
  EXPECT_EQ(charges_->Scalar("SELECT to_regclass('" + Day(0) + "') IS NOT NULL AND to_regclass('charges') IS NOT NULL"),
            "t");

  const auto projection = As(projection_->url(), roles_->projection);
  EXPECT_THAT(ErrorOf(projection, "DROP TABLE captured_totals"), HasSubstr("must be owner of table captured_totals"));
  EXPECT_THAT(ErrorOf(projection, "SELECT inbox_drop_day('inbox_default')"),
              HasSubstr("inbox_default is not a day partition of inbox"));
  EXPECT_THAT(ErrorOf(projection, "CREATE TABLE mine (a int)"), HasSubstr("permission denied for schema public"));
}

TEST_F(RolesE2E, EveryDaemonDoesItsWorkAsItsOwnRole) {
  const auto started = std::chrono::system_clock::now();
  StartAcquirer();

  // charge-admin, as the operator: a merchant and its key.
  const auto added =
      Admin({"merchant", "add", "--name", "Loja Papeis", "--reason", "onboarding ONB-9", "--by", "alice"});
  ASSERT_EQ(added.exit_code, 0) << added.out << added.err;
  const auto merchant = added.out.substr(0, added.out.find('\n'));
  ASSERT_THAT(merchant, MatchesRegex("[0-9a-f-]{36}"));
  const auto issued = Admin({"key", "issue", "--merchant", merchant, "--reason", "onboarding ONB-9", "--by", "alice"});
  ASSERT_EQ(issued.exit_code, 0) << issued.out << issued.err;
  const auto api_key = issued.out.substr(0, issued.out.find('\n'));
  ASSERT_THAT(api_key, MatchesRegex("sk_[0-9A-Za-z]{43}"));

  // charge-api, as its role: a charge, captured.
  std::string taken;
  {
    ServiceProcess api({CHARGE_API_BIN},
                       FastChargeApiEnv(As(charges_->url(), roles_->api), sim_->port(), kAcquirerKey));
    HttpTestClient client(api.port(), "127.0.0.1", 30s);
    const auto r = client.Post("/v1/charges",
                               R"({"amount": 1000, "currency": "BRL", "order_id": "PED-1",)"
                               R"( "payment_method": "pm_tok_visa"})",
                               {{"Authorization", "Bearer " + api_key},
                                {"Idempotency-Key", "roles-1"},
                                {"Content-Type", "application/json"}});
    ASSERT_EQ(r.status(), 201u) << r.response.body() << api.Output();
    taken = std::string(r.json().as_object().at("id").as_string());
    EXPECT_EQ(HttpTestClient(api.admin_port()).Get("/readyz").status(), 200u) << api.Output();
    EXPECT_THAT(api.Output(), Not(HasSubstr("permission denied")));
  }

  // The reconciler, as its role: a charge a crashed charge-api left pending, captured at the acquirer.
  const auto pending = charges_->Scalar(
      "WITH ins AS ("
      " INSERT INTO charges (id, merchant_id, idempotency_key, request_fingerprint, order_id, amount, currency,"
      "  payment_method, last_sequence, attempt_count, created_at, updated_at)"
      " VALUES (gen_random_uuid(), '" + merchant + "', 'roles-2', sha256('roles-2'::bytea), 'PED-2', 2500, 'BRL',"
      "  'pm_tok_visa', 1, 1, now() - interval '1 minute', now() - interval '1 minute') RETURNING *"
      "), ev AS ("
      " INSERT INTO outbox (id, aggregateid, type, payload, sequence, shard)"
      " SELECT gen_random_uuid(), charge_public_id(ins.id), 'payments.charge.initiated.v1',"
      "  charge_event_payload(ROW(ins.*)::charges), 1, outbox_shard(ins.id) FROM ins"
      "), att AS ("
      " INSERT INTO acquirer_attempts (charge_id, attempt_no, request_id, operation, actor, started_at)"
      " SELECT ins.id, 1, gen_random_uuid(), 'capture', 'charge-api', ins.created_at FROM ins"
      ") SELECT charge_public_id(id) FROM ins");
  const auto capture = sim_client_->Post(
      "/v1/captures",
      json::serialize(json::object{
          {"amount", 2500}, {"currency", "BRL"}, {"reference", pending}, {"payment_method", "pm_tok_visa"}}),
      {{"Authorization", std::string("Bearer ") + kAcquirerKey}, {"Idempotency-Key", merchant + ":roles-2"}});
  ASSERT_EQ(capture.status(), 201u) << capture.response.body();
  auto reconciler_env = AcquirerEnv(roles_->reconciler);
  reconciler_env["RECONCILER_GRACE_PERIOD"] = "0s";
  reconciler_env["METRICS_PUSHGATEWAY_URL"] = std::nullopt;
  const auto reconciled = RunProcess({RECONCILER_BIN}, reconciler_env, 60s);
  ASSERT_EQ(reconciled.exit_code, 0) << reconciled.out << reconciled.err;
  EXPECT_EQ(charges_->Scalar("SELECT status FROM charges WHERE charge_public_id(id) = '" + pending + "'"), "captured")
      << reconciled.out << reconciled.err;

  // The window report, as the reconciler: a capture no charge of ours names is kept for a person, who voids
  // it with charge-admin as the operator.
  const auto orphan = sim_client_->Post(
      "/v1/captures",
      json::serialize(json::object{{"amount", 4200},
                                   {"currency", "BRL"},
                                   {"reference", "ch_" + std::string(32, 'b')},
                                   {"payment_method", "pm_tok_visa"}}),
      {{"Authorization", std::string("Bearer ") + kAcquirerKey}, {"Idempotency-Key", merchant + ":lost-1"}});
  ASSERT_EQ(orphan.status(), 201u) << orphan.response.body();
  const std::string orphan_id(orphan.json().as_object().at("id").as_string());
  const auto window_to = std::chrono::system_clock::now() + 1ms;
  std::this_thread::sleep_until(window_to + 1100ms);  // settled: the visibility window (1 s) has passed
  reconciler_env["RECONCILER_VISIBILITY_WINDOW"] = "1s";
  const auto window = RunProcess({RECONCILER_BIN, "window", "--from", util::FormatRfc3339(started - 1s), "--to",
                                  util::FormatRfc3339(window_to)},
                                 reconciler_env, 60s);
  ASSERT_EQ(window.exit_code, 0) << window.out << window.err;
  EXPECT_EQ(ParseWindowReport(window.out).summary.at("orphans_recorded").as_int64(), 1) << window.out;
  const auto orphans = Admin({"orphan", "list"});
  ASSERT_EQ(orphans.exit_code, 0) << orphans.out << orphans.err;
  EXPECT_THAT(orphans.out, HasSubstr(orphan_id));
  const auto voided = Admin({"orphan", "void", orphan_id, "--reason", "OPS-51: not a sale of ours", "--by", "carol"});
  ASSERT_EQ(voided.exit_code, 0) << voided.out << voided.err;
  EXPECT_EQ(charges_->Scalar("SELECT status || ' ' || resolved_by FROM orphan_captures"), "voided carol");

  // charge-admin, as the operator: a review decided. The acquirer contradicted charge-api's capture (as the
  // window report flags it); it still holds it, so a person keeps the charge captured.
  charges_->Execute(
      "WITH upd AS ("
      " UPDATE charges SET status = 'needs_review', failure_reason = 'acquirer_void_contradicts_captured',"
      "  last_sequence = last_sequence + 1, updated_at = now()"
      " WHERE charge_public_id(id) = '" + taken + "' RETURNING *)"
      " INSERT INTO outbox (id, aggregateid, type, payload, sequence, shard, created_at)"
      " SELECT gen_random_uuid(), charge_public_id(upd.id), 'payments.charge.needs_review.v1',"
      " charge_event_payload(ROW(upd.*)::charges), upd.last_sequence, outbox_shard(upd.id), upd.updated_at FROM upd");
  const auto listed = Admin({"review", "list"});
  ASSERT_EQ(listed.exit_code, 0) << listed.out << listed.err;
  EXPECT_THAT(listed.out, HasSubstr(taken));
  const auto resolved =
      Admin({"review", "resolve", taken, "--to", "captured", "--reason", "ticket OPS-9", "--by", "carol"});
  ASSERT_EQ(resolved.exit_code, 0) << resolved.out << resolved.err;
  EXPECT_EQ(charges_->Scalar("SELECT status || ' ' || resolved_by FROM charges WHERE charge_public_id(id) = '" + taken +
                             "'"),
            "captured carol");

  // outbox-relay's partition work, as the relay: days made ahead, a published day moved to history, days past
  // retention dropped from the outbox and from history, with the owner's functions.
  charges_->Execute("SELECT outbox_ensure_partitions((now() AT TIME ZONE 'UTC')::date - 10,"
                    " (now() AT TIME ZONE 'UTC')::date - 9)");
  charges_->Execute("SELECT outbox_ensure_partitions((now() AT TIME ZONE 'UTC')::date - 3,"
                    " (now() AT TIME ZONE 'UTC')::date - 3)");
  charges_->Execute("ALTER TABLE outbox DETACH PARTITION " + Day(-10) + "; ALTER TABLE " + Day(-10) +
                    " INHERIT outbox_history");
  charges_->Execute("INSERT INTO outbox (id, aggregateid, type, payload, sequence, shard, created_at, published_at)"
                    " VALUES (gen_random_uuid(), 'ch_old', 't', '{}', 1, 1, now() - interval '9 days', now())");
  auto retention_env = RelayEnv();
  retention_env["RETENTION_DAYS_AHEAD"] = "9";
  const auto retention = RunProcess({OUTBOX_RELAY_BIN, "retention"}, retention_env, 60s);
  ASSERT_EQ(retention.exit_code, 0) << retention.out << retention.err;
  const auto report = json::parse(retention.out).as_object();
  EXPECT_EQ(report.at("partitions_created").as_int64(), 2) << retention.out;  // 0001 made up to today + 7
  EXPECT_EQ(json::serialize(report.at("moved_to_history")), json::serialize(json::array{json::string(Day(-3))}));
  EXPECT_EQ(json::serialize(report.at("dropped")),
            json::serialize(json::array{json::string(Day(-10)), json::string(Day(-9))}));
  EXPECT_EQ(json::serialize(report.at("failed")), "[]");

  // The relay daemon, as its role: its own retention pass at start trims the days beyond its two ahead, and it
  // publishes every event of the three writers to Kafka.
  {
    ServiceProcess relay({OUTBOX_RELAY_BIN}, RelayEnv());
    const auto unpublished = [&] { return charges_->Scalar("SELECT count(*) FROM outbox WHERE published_at IS NULL"); };
    EXPECT_TRUE(Eventually([&] { return unpublished() == "0"; }, 30s))
        << relay.Output();
    const auto trimmed = [&] { return charges_->Scalar("SELECT to_regclass('" + Day(3) + "') IS NULL"); };
    EXPECT_TRUE(Eventually([&] { return trimmed() == "t"; }, 10s))
        << relay.Output();
    EXPECT_EQ(charges_->Scalar("SELECT to_regclass('" + Day(2) + "') IS NOT NULL"), "t");
    EXPECT_THAT(relay.Output(), Not(HasSubstr("permission denied")));
    EXPECT_THAT(relay.Output(), Not(HasSubstr("retention failed")));
  }
  std::set<std::string> sources;
  std::set<std::string> pending_types;
  ConsumeTopicUntil(
      topic_->bootstrap_servers(), topic_->name(),
      [&](const ConsumedMessage& m) {
        if (m.headers.contains("ce_source")) sources.insert(m.headers.at("ce_source"));
        if (m.key == pending) pending_types.insert(m.headers.at("ce_type"));
        return sources.contains("/charge-outbox/charge-api") && sources.contains("/charge-outbox/reconciler") &&
               sources.contains("/charge-outbox/charge-admin") && pending_types.size() == 2;
      },
      30s);
  EXPECT_TRUE(sources.contains("/charge-outbox/charge-api"));
  EXPECT_TRUE(sources.contains("/charge-outbox/reconciler"));
  EXPECT_TRUE(sources.contains("/charge-outbox/charge-admin"));
  EXPECT_THAT(pending_types, ElementsAre("payments.charge.captured.v1", "payments.charge.initiated.v1"));

  // outbox-relay's parked commands are a person's: run with the operator's role.
  auto parked_env = RelayEnv();
  parked_env["DATABASE_URL"] = As(charges_->url(), roles_->op);
  const auto parked = RunProcess({OUTBOX_RELAY_BIN, "parked", "list"}, parked_env, 60s);
  EXPECT_EQ(parked.exit_code, 0) << parked.out << parked.err;
  const auto retry = RunProcess({OUTBOX_RELAY_BIN, "parked", "retry", "00000000-0000-4000-8000-000000000000", "--by",
                                 "carol", "--reason", "ticket OPS-9"},
                                parked_env, 60s);
  EXPECT_EQ(retry.exit_code, 1) << retry.out << retry.err;
  EXPECT_THAT(retry.err, HasSubstr("no parked, unpublished event"));

  // settlement-projection, as its role: consumes the events into the totals; its retention at start drops
  // an inbox day past retention through the owner's function.
  projection_->Execute("SELECT inbox_ensure_partitions((now() AT TIME ZONE 'UTC')::date - 20,"
                       " (now() AT TIME ZONE 'UTC')::date - 20)");
  const auto old_inbox_day =
      "inbox_" + projection_->Scalar("SELECT to_char((now() AT TIME ZONE 'UTC')::date - 20, 'YYYYMMDD')");
  ASSERT_EQ(projection_->Scalar("SELECT to_regclass('" + old_inbox_day + "') IS NOT NULL"), "t");
  ServiceProcess projection({SETTLEMENT_PROJECTION_BIN},
                            ProjectionEnv(As(projection_->url(), roles_->projection)));
  const auto totals = [&] {
    return projection_->Scalar("SELECT sum(captured_count) || ' ' || sum(captured_amount) FROM captured_totals"
                               " WHERE merchant_id = '" + merchant + "'");
  };
  EXPECT_TRUE(Eventually([&] { return totals() == "2 3500"; }, 60s)) << totals() << projection.Output();
  EXPECT_EQ(projection_->Scalar("SELECT to_regclass('" + old_inbox_day + "') IS NULL"), "t") << projection.Output();
  EXPECT_THAT(projection.Output(), Not(HasSubstr("permission denied")));
}

}  // namespace
}  // namespace charge_outbox::testing
