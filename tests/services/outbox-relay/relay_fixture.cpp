#include "relay_fixture.hpp"

#include <pqxx/pqxx>

#include <algorithm>
#include <filesystem>
#include <boost/json/parse.hpp>
#include <future>
#include <random>
#include <set>
#include <sstream>

#include "event_contract.hpp"
#include "http_test_client.hpp"
#include "test_env.hpp"

namespace charge_outbox::testing {
namespace {

// A payload as charge_event_payload makes it for the event's type (it validates against schemas/events),
// padded to size with trailing whitespace: still the same JSON, and `json` keeps the bytes as written.
constexpr const char* kInsert =
    "INSERT INTO outbox (id, aggregateid, type, payload, sequence, shard, traceparent)"
    " VALUES (gen_random_uuid(), charge_public_id($1::uuid), $2,"
    "         (json_strip_nulls(json_build_object("
    "            'id', charge_public_id($1::uuid), 'merchant_id', '00000000-0000-4000-8000-000000000001',"
    "            'order_id', 'order-' || substr(charge_public_id($1::uuid), 4, 8), 'amount', 2500,"
    "            'currency', 'EUR',"
    "            'status', CASE $3::int WHEN 1 THEN 'pending' WHEN 2 THEN 'captured' ELSE 'needs_review' END,"
    "            'acquirer_capture_id',"
    "              CASE WHEN $3::int >= 2 THEN 'cap_' || substr(charge_public_id($1::uuid), 4, 8) END,"
    "            'failure_reason', CASE WHEN $3::int >= 3 THEN 'window_mismatch' END,"
    "            'sequence', $3::int, 'created_at', rfc3339(now()), 'updated_at', rfc3339(now())))::text"
    "          || repeat(' ', $4::int))::json,"
    "         $3::int, outbox_shard($1::uuid), NULLIF($5, ''))"
    " RETURNING id::text, aggregateid";

const char* TypeOf(int sequence) {
  switch (sequence) {
    case 1: return "payments.charge.initiated.v1";
    case 2: return "payments.charge.captured.v1";
    default: return "payments.charge.needs_review.v1";
  }
}

WrittenEvent Insert(pqxx::connection& conn, const std::string& uuid, int sequence, int payload_bytes,
                    const std::string& traceparent) {
  pqxx::work tx(conn);
  const auto row = tx.exec_prepared1("insert_event", uuid, TypeOf(sequence), sequence, payload_bytes, traceparent);
  tx.commit();
  return {row[0].as<std::string>(), row[1].as<std::string>(), sequence};
}

}  // namespace

std::string NewUuid() {
  static std::mutex mutex;
  static std::mt19937_64 random(std::random_device{}());
  std::lock_guard lock(mutex);
  std::uniform_int_distribution<std::uint64_t> d;
  char buf[40];
  const auto hi = d(random);
  const auto lo = d(random);
  std::snprintf(buf, sizeof buf, "%08x-%04x-4%03x-8%03x-%012llx", static_cast<unsigned>(hi >> 32),
                static_cast<unsigned>((hi >> 16) & 0xFFFF), static_cast<unsigned>(hi & 0xFFF),
                static_cast<unsigned>(lo >> 52 & 0xFFF), static_cast<unsigned long long>(lo & 0xFFFFFFFFFFFFull));
  return buf;
}

std::string ChargeId(const std::string& uuid) {
  std::string hex;
  for (char c : uuid) {
    if (c != '-') hex += c;
  }
  return "ch_" + hex;
}

WrittenEvent WriteEvent(const std::string& database_url, const std::string& charge_uuid, int sequence,
                        int payload_bytes, const std::string& traceparent) {
  pqxx::connection conn(database_url);
  conn.prepare("insert_event", kInsert);
  return Insert(conn, charge_uuid, sequence, payload_bytes, traceparent);
}

EventWriter::EventWriter(const std::string& database_url)
    : conn_(std::make_unique<pqxx::connection>(database_url)) {
  conn_->prepare("insert_event", kInsert);
}

EventWriter::~EventWriter() = default;

WrittenEvent EventWriter::Write(const std::string& charge_uuid, int sequence) {
  return Insert(*conn_, charge_uuid, sequence, 0, "");
}

std::vector<WrittenEvent> WriteChargeEvents(const std::string& database_url, int charges, int threads,
                                            int payload_bytes) {
  std::vector<std::future<std::vector<WrittenEvent>>> workers;
  for (int t = 0; t < threads; ++t) {
    const int mine = charges / threads + (t < charges % threads ? 1 : 0);
    workers.push_back(std::async(std::launch::async, [&database_url, mine, payload_bytes] {
      pqxx::connection conn(database_url);
      conn.prepare("insert_event", kInsert);
      std::vector<WrittenEvent> out;
      // A window of charges in progress: each step writes the next event of one of them, so events of
      // different charges interleave the way concurrent requests make them.
      std::vector<std::pair<std::string, int>> open;  // uuid, events written
      int started = 0;
      std::mt19937 random(std::random_device{}());
      while (started < mine || !open.empty()) {
        if (started < mine && open.size() < 16) {
          open.emplace_back(NewUuid(), 0);
          ++started;
        }
        const auto i = std::uniform_int_distribution<std::size_t>(0, open.size() - 1)(random);
        auto& [uuid, written] = open[i];
        const int events = (std::hash<std::string>{}(uuid) % 10 == 0) ? 3 : 2;
        out.push_back(Insert(conn, uuid, ++written, payload_bytes, ""));
        if (written == events) {
          open[i] = open.back();
          open.pop_back();
        }
      }
      return out;
    }));
  }
  std::vector<WrittenEvent> all;
  for (auto& w : workers) {
    auto part = w.get();
    all.insert(all.end(), part.begin(), part.end());
  }
  return all;
}

std::int64_t Unpublished(const PgTestDatabase& db) {
  return std::stoll(db.Scalar("SELECT count(*) FROM outbox WHERE published_at IS NULL"));
}

bool OutboxLockedWithin(const PgTestDatabase& db, std::chrono::milliseconds timeout) {
  pqxx::connection conn(db.url());
  pqxx::work tx(conn);
  tx.exec("SET LOCAL lock_timeout = '" + std::to_string(timeout.count()) + "ms'");
  try {
    tx.exec("LOCK TABLE outbox IN ACCESS EXCLUSIVE MODE");
    return true;
  } catch (const pqxx::sql_error& e) {
    if (e.sqlstate() != "55P03") throw;  // lock_not_available
    return false;
  }
}

std::optional<double> MetricValue(std::uint16_t port, const std::string& series) {
  HttpTestClient client(port);
  const auto r = client.Get("/metrics");
  if (!r.ok() || r.status() != 200) return std::nullopt;
  std::istringstream lines(r.response.body());
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return std::nullopt;
}

std::vector<ConsumedMessage> ConsumeAll(const KafkaTestTopic& topic, const std::vector<WrittenEvent>& expected,
                                        std::chrono::milliseconds timeout) {
  std::set<std::string> wanted;
  for (const auto& e : expected) wanted.insert(e.id);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::size_t count = expected.size();
  std::vector<ConsumedMessage> consumed;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return consumed;
    consumed = topic.Consume(count, left);
    std::set<std::string> seen;
    for (const auto& m : consumed) {
      if (const auto id = EventId(m); id && wanted.contains(*id)) seen.insert(*id);
    }
    if (seen.size() == wanted.size()) return consumed;
    if (consumed.size() < count) return consumed;  // timed out before `count` arrived
    // Duplicates took some of the places: read again, further.
    count = consumed.size() + (wanted.size() - seen.size());
  }
}

namespace {

bool Structured(const ConsumedMessage& m) {
  const auto it = m.headers.find("content-type");
  return it != m.headers.end() && it->second == "application/cloudevents+json";
}

}  // namespace

std::optional<std::string> EventId(const ConsumedMessage& m) {
  if (Structured(m)) {
    const auto value = boost::json::parse(m.value);
    if (const auto* id = value.as_object().if_contains("id"); id != nullptr && id->is_string()) {
      return std::string(id->as_string());
    }
    return std::nullopt;
  }
  const auto it = m.headers.find("ce_id");
  if (it == m.headers.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> ContractViolations(const std::vector<ConsumedMessage>& consumed,
                                            const std::vector<WrittenEvent>& expected) {
  // Every message against the published contract first: its payload's schema, its attributes.
  std::vector<std::string> problems = EventContractViolations(consumed, PROJECT_SOURCE_DIR);
  std::map<std::string, const WrittenEvent*> by_id;
  for (const auto& e : expected) by_id[e.id] = &e;
  std::map<std::string, int> highest;  // charge -> highest sequence seen so far
  std::set<std::string> seen;
  for (const auto& m : consumed) {
    const auto id = EventId(m);
    if (!id) {
      problems.push_back("a message without an event id");
      continue;
    }
    const auto e = by_id.find(*id);
    if (e == by_id.end()) continue;  // not one of this test's events
    if (m.key != e->second->charge) problems.push_back("event " + *id + " has key " + m.key);
    const auto value = boost::json::parse(m.value);
    const auto& payload = Structured(m) ? value.at("data") : value;
    const int seq = static_cast<int>(payload.at("sequence").as_int64());
    if (seq != e->second->sequence) problems.push_back("event " + *id + " carries the wrong sequence");
    auto& top = highest[m.key];
    if (!seen.contains(*id)) {
      // First arrivals of a charge's events must ascend: N+1 before N is a reordering. (A gap is allowed
      // here, for an event skipped by an operator; a missing event is caught below.)
      if (seq <= top) {
        problems.push_back("charge " + m.key + ": sequence " + std::to_string(seq) + " arrived after " +
                           std::to_string(top));
      }
      top = std::max(top, seq);
      seen.insert(*id);
    }
  }
  for (const auto& e : expected) {
    if (!seen.contains(e.id)) problems.push_back("missing event " + e.id + " (" + e.charge + " #" + std::to_string(e.sequence) + ")");
  }
  return problems;
}

namespace {

ProcessResult RunKafkaScript(const std::string& script) {
  const std::string lib = std::string(PROJECT_SOURCE_DIR) + "/deploy/local/lib/";
  return RunProcess({"/bin/bash", "-c", "source " + lib + "common.sh && source " + lib + "kafka.sh && " + script}, {},
                    std::chrono::seconds{180});
}

}  // namespace

OwnBroker::OwnBroker()
    : state_((std::filesystem::temp_directory_path() / UniqueName("relay_broker")).string()),
      port_(FreeLoopbackPort()),
      cport_(FreeLoopbackPort()) {
  std::filesystem::create_directories(state_);
}

OwnBroker::~OwnBroker() {
  try {
    RunKafkaScript("kafka_stop " + state_);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stopping the test's own broker failed: %s\n", e.what());
  }
  std::error_code ignored;
  std::filesystem::remove_all(state_, ignored);
}

void OwnBroker::Start(int advertised_port) {
  const std::string advertise =
      advertised_port > 0 ? "export KAFKA_ADVERTISED_PORT=" + std::to_string(advertised_port) + "; " : "";
  const auto r = RunKafkaScript(advertise + "kafka_start " + state_ + " " + std::to_string(port_) + " " +
                                std::to_string(cport_) + " && kafka_wait " + std::to_string(port_) + " 120 " + state_);
  if (r.exit_code != 0) throw std::runtime_error("own broker did not start:\n" + r.err);
}

void OwnBroker::Stop() {
  const auto r = RunKafkaScript("kafka_stop " + state_);
  if (r.exit_code != 0) throw std::runtime_error("own broker did not stop:\n" + r.err);
}

RelayE2E::RelayE2E(const std::string& test_name, int partitions)
    : db_(PgTestDatabase::Create(test_name, PgTestDatabase::Schema::kMigrated)),
      topic_(std::make_unique<KafkaTestTopic>("relay", partitions)) {}

EnvChanges RelayE2E::BaseEnv() const {
  return {{"DATABASE_URL", db_->url()},
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

std::unique_ptr<ServiceProcess> RelayE2E::StartRelay(const EnvChanges& extra) const {
  auto env = BaseEnv();
  for (const auto& [k, v] : extra) env[k] = v;
  return std::make_unique<ServiceProcess>(std::vector<std::string>{OUTBOX_RELAY_BIN}, env);
}

ProcessResult RelayE2E::RunCommand(const std::vector<std::string>& args, const EnvChanges& extra) const {
  auto env = BaseEnv();
  for (const auto& [k, v] : extra) env[k] = v;
  std::vector<std::string> argv{OUTBOX_RELAY_BIN};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunProcess(argv, env, std::chrono::seconds{30});
}

}  // namespace charge_outbox::testing
