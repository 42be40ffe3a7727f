#include "projection_fixture.hpp"

#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>
#include <pqxx/pqxx>

#include <cstdlib>
#include <regex>
#include <thread>

#include "charge_outbox/util/sha256.hpp"
#include "charge_stack.hpp"
#include "test_env.hpp"

namespace charge_outbox::testing {
namespace {

// One charge as charge-api writes it (pg_charge_store.cpp: kBegin, kComplete, kFlagForReview): each
// change of the row and its outbox event, payload charge_event_payload(row), in one statement, with the
// outbox row's created_at (the relay's ce_time) equal to the charge's updated_at. `outcome`: captured,
// failed (declined), review (captured, then flagged needs_review hours later).
constexpr const char* kWriteChargeFunction = R"sql(
CREATE OR REPLACE FUNCTION test_write_charge(m uuid, amt bigint, cur text, outcome text, at timestamptz)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  c charges;
BEGIN
  INSERT INTO charges (id, merchant_id, idempotency_key, request_fingerprint, order_id, amount, currency,
                       payment_method, last_sequence, created_at, updated_at)
  VALUES (gen_random_uuid(), m, gen_random_uuid()::text, sha256(convert_to(gen_random_uuid()::text, 'UTF8')),
          'order-' || substr(md5(random()::text), 1, 8), amt, cur, 'pm_test_token', 1, at, at)
  RETURNING * INTO c;
  INSERT INTO outbox (id, aggregateid, type, payload, sequence, shard, created_at)
  VALUES (gen_random_uuid(), charge_public_id(c.id), 'payments.charge.initiated.v1', charge_event_payload(c), 1,
          outbox_shard(c.id), c.updated_at);

  UPDATE charges SET status = (CASE outcome WHEN 'failed' THEN 'failed' ELSE 'captured' END)::charge_status,
                     acquirer_capture_id = CASE WHEN outcome <> 'failed' THEN 'cap_' || substr(md5(random()::text), 1, 12) END,
                     decline_code = CASE WHEN outcome = 'failed' THEN 'insufficient_funds' END,
                     updated_at = at + interval '250 milliseconds', last_sequence = 2
   WHERE id = c.id RETURNING * INTO c;
  INSERT INTO outbox (id, aggregateid, type, payload, sequence, shard, created_at)
  VALUES (gen_random_uuid(), charge_public_id(c.id), 'payments.charge.' || c.status || '.v1', charge_event_payload(c),
          2, outbox_shard(c.id), c.updated_at);
  IF outcome <> 'review' THEN
    RETURN 2;
  END IF;

  -- Flagged later, often on another UTC day than the capture: the capture's day must lose it.
  UPDATE charges SET status = 'needs_review', failure_reason = 'window_mismatch',
                     updated_at = least(at + interval '9 hours', now()), last_sequence = 3
   WHERE id = c.id RETURNING * INTO c;
  INSERT INTO outbox (id, aggregateid, type, payload, sequence, shard, created_at)
  VALUES (gen_random_uuid(), charge_public_id(c.id), 'payments.charge.needs_review.v1', charge_event_payload(c), 3,
          outbox_shard(c.id), c.updated_at);
  RETURN 3;
END;
$$;
)sql";

// `n` charges of random merchants of $1: 60% captured, 25% declined, 15% captured then flagged; EUR or
// USD; updated_at in the last 60 hours. Returns the events written.
constexpr const char* kWriteCharges =
    "SELECT coalesce(sum(test_write_charge(($1::uuid[])[1 + floor(random() * cardinality($1::uuid[]))::int],"
    "         (100 + floor(random() * 100000))::bigint, CASE WHEN random() < 0.5 THEN 'EUR' ELSE 'USD' END,"
    "         CASE WHEN r < 0.60 THEN 'captured' WHEN r < 0.85 THEN 'failed' ELSE 'review' END,"
    "         now() - random() * interval '60 hours')), 0)"
    "  FROM (SELECT random() AS r FROM generate_series(1, $2::int)) s";

// The daemon under test: the one built with the suite, or SETTLEMENT_PROJECTION_BIN (another build of it,
// for example one with a defect put in on purpose to see which test catches it).
std::string ProjectionBinary() {
  const char* other = std::getenv("SETTLEMENT_PROJECTION_BIN");
  return other != nullptr && *other != '\0' ? other : SETTLEMENT_PROJECTION_BIN;
}

std::string PgArray(const std::vector<std::string>& items) {
  std::string out = "{";
  for (const auto& i : items) out += (out.size() > 1 ? "," : "") + i;
  return out + "}";
}

}  // namespace

HttpHeaders BearerHeader(const std::string& token) { return {{"Authorization", "Bearer " + token}}; }

std::string TotalsKey(const std::string& merchant, const std::string& day, const std::string& currency) {
  return merchant + "|" + day + "|" + currency;
}

ProjectionE2E::ProjectionE2E(const std::string& test_name, int partitions)
    : source_(std::make_unique<RelayE2E>(test_name, partitions)),
      projection_(PgTestDatabase::Create("proj_" + test_name.substr(0, 20), PgTestDatabase::Schema::kEmpty)),
      group_(UniqueName("settlement")),
      partitions_(partitions) {
  source_->db().Execute(kWriteChargeFunction);
  const auto migrated = RunProcess({ProjectionBinary(), "migrate"}, ProjectionEnv(), std::chrono::seconds{30});
  if (migrated.exit_code != 0) {
    throw std::runtime_error("settlement-projection migrate failed:\n" + migrated.out + migrated.err);
  }
}

EnvChanges ProjectionE2E::ProjectionEnv(const EnvChanges& extra) const {
  EnvChanges env{{"DATABASE_URL", projection_->url()},
                 {"KAFKA_BOOTSTRAP_SERVERS", source_->topic().bootstrap_servers()},
                 {"KAFKA_TOPIC", source_->topic().name()},
                 {"KAFKA_GROUP_ID", group_},
                 {"HTTP_ADDRESS", "127.0.0.1"},
                 {"HTTP_PORT", "0"},
                 {"ADMIN_ADDRESS", "127.0.0.1"},
                 {"ADMIN_PORT", "0"},
                 {"HTTP_TOKEN_HASHES", util::Sha256Hex(kProjectionToken)},
                 {"INBOX_SWEEP_INTERVAL", "100ms"},
                 {"SHUTDOWN_DEADLINE", "5s"},
                 {"FAILPOINTS", std::nullopt}};
  for (const auto& [k, v] : extra) env[k] = v;
  return env;
}

std::unique_ptr<ServiceProcess> ProjectionE2E::StartProjection(const EnvChanges& extra) const {
  return std::make_unique<ServiceProcess>(std::vector<std::string>{ProjectionBinary()}, ProjectionEnv(extra));
}

std::vector<std::string> ProjectionE2E::AddMerchants(int count) const {
  std::vector<std::string> ids;
  for (int i = 0; i < count; ++i) {
    ids.push_back(NewUuid());
    InsertMerchant(source_->db(), ids.back(), "sk_test_" + ids.back());
  }
  return ids;
}

int ProjectionE2E::WriteCharges(const std::vector<std::string>& merchants, int count) const {
  pqxx::connection conn(source_->db().url());
  pqxx::work tx(conn);
  const int events = tx.exec_params1(kWriteCharges, PgArray(merchants), count)[0].as<int>();
  tx.commit();
  return events;
}

std::unique_ptr<ServiceProcess> ProjectionE2E::DrainOutbox(std::chrono::milliseconds timeout,
                                                          const EnvChanges& extra) const {
  auto relay = source_->StartRelay(extra);
  if (!Eventually([&] { return Unpublished(source_->db()) == 0; }, timeout)) {
    ADD_FAILURE() << "the relay did not drain the outbox:\n" << relay->Output();
  }
  return relay;
}

bool ProjectionE2E::OffsetsCommitted() const {
  // A consumer of the group that never subscribes does not join it: it only reads its committed offsets.
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "bootstrap.servers", source_->topic().bootstrap_servers().c_str(), err, sizeof err);
  rd_kafka_conf_set(conf, "group.id", group_.c_str(), err, sizeof err);
  rd_kafka_conf_set(conf, "enable.auto.commit", "false", err, sizeof err);
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
  if (rk == nullptr) {
    rd_kafka_conf_destroy(conf);
    throw std::runtime_error(std::string("kafka consumer: ") + err);
  }
  const auto& topic = source_->topic().name();
  rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(partitions_);
  for (int p = 0; p < partitions_; ++p) rd_kafka_topic_partition_list_add(list, topic.c_str(), p);
  bool done = rd_kafka_committed(rk, list, 5'000) == RD_KAFKA_RESP_ERR_NO_ERROR;
  for (int i = 0; done && i < list->cnt; ++i) {
    std::int64_t low = 0;
    std::int64_t high = 0;
    done = rd_kafka_query_watermark_offsets(rk, topic.c_str(), list->elems[i].partition, &low, &high, 5'000) ==
               RD_KAFKA_RESP_ERR_NO_ERROR &&
           (high == low || list->elems[i].offset == high);
  }
  rd_kafka_topic_partition_list_destroy(list);
  rd_kafka_destroy(rk);
  return done;
}

bool ProjectionE2E::CaughtUp() const {
  const auto source = source_->db().Scalar("SELECT count(*) || '/' || coalesce(sum(last_sequence), 0) FROM charges");
  const auto inbox = projection_->Scalar("SELECT count(*) || '/' || coalesce(sum(last_sequence), 0) FROM inbox_charges");
  return source == inbox;
}

bool ProjectionE2E::WaitCaughtUp(std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!CaughtUp()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds{100});
  }
  return true;
}

TotalsByKey ProjectionTotals(const PgTestDatabase& projection) {
  pqxx::connection conn(projection.url());
  pqxx::nontransaction tx(conn);
  TotalsByKey out;
  for (const auto& row : tx.exec("SELECT merchant_id, day::text, currency, captured_count, captured_amount"
                                 "  FROM captured_totals WHERE captured_count <> 0 OR captured_amount <> 0")) {
    out[TotalsKey(row[0].as<std::string>(), row[1].as<std::string>(), row[2].as<std::string>())] = {
        row[3].as<std::int64_t>(), row[4].as<std::int64_t>()};
  }
  return out;
}

std::map<std::string, int> InboxProgress(const PgTestDatabase& projection) {
  pqxx::connection conn(projection.url());
  pqxx::nontransaction tx(conn);
  std::map<std::string, int> out;
  for (const auto& row : tx.exec("SELECT charge_id, last_sequence FROM inbox_charges")) {
    out[row[0].as<std::string>()] = row[1].as<int>();
  }
  return out;
}

void ProjectionE2E::ExpectProjectionMatchesSource() const {
  pqxx::connection conn(source_->db().url());
  pqxx::nontransaction tx(conn);
  TotalsByKey expected;
  for (const auto& row : tx.exec("SELECT merchant_id::text, (updated_at AT TIME ZONE 'UTC')::date::text, currency,"
                                 "       count(*), sum(amount)"
                                 "  FROM charges WHERE status = 'captured' GROUP BY 1, 2, 3")) {
    expected[TotalsKey(row[0].as<std::string>(), row[1].as<std::string>(), row[2].as<std::string>())] = {
        row[3].as<std::int64_t>(), row[4].as<std::int64_t>()};
  }
  ASSERT_FALSE(expected.empty()) << "a test of nothing";
  const auto actual = ProjectionTotals(*projection_);
  for (const auto& [key, totals] : expected) {
    const auto it = actual.find(key);
    if (it == actual.end()) {
      ADD_FAILURE() << key << ": missing from captured_totals (expected " << totals.count << " / " << totals.amount << ")";
    } else if (it->second != totals) {
      ADD_FAILURE() << key << ": captured_totals has " << it->second.count << " / " << it->second.amount
                    << ", the source " << totals.count << " / " << totals.amount;
    }
  }
  for (const auto& [key, totals] : actual) {
    if (!expected.contains(key)) ADD_FAILURE() << key << ": in captured_totals (" << totals.count << " / " << totals.amount << ") but no captured charge";
  }

  // Each charge applied exactly up to its last event: none skipped, none beyond.
  std::map<std::string, int> written;
  for (const auto& row : tx.exec("SELECT aggregateid, count(*) FROM outbox GROUP BY 1")) {
    written[row[0].as<std::string>()] = row[1].as<int>();
  }
  EXPECT_EQ(InboxProgress(*projection_), written);
}

ChildProcess ProjectionE2E::StartProjectionProcess(const EnvChanges& extra) const {
  return ChildProcess({ProjectionBinary()}, ProjectionEnv(extra));
}

std::uint16_t ApiPort(const ServiceProcess& projection) {
  std::smatch m;
  const auto out = projection.Output();
  if (!std::regex_search(out, m, std::regex(R"(API on [0-9.]+:([0-9]+))"))) return 0;
  return static_cast<std::uint16_t>(std::stoi(m[1]));
}

double Metric(const ServiceProcess& service, const std::string& series) {
  return MetricValue(service.admin_port(), series).value_or(0);
}

}  // namespace charge_outbox::testing
