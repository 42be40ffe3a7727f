// What the outbox-relay e2e suites share: writing events as the charge store does (concurrently, each in
// its own transaction), starting the real binary, reading its metrics, and reading the topic back with
// a real consumer and checking the delivery contract (none missing, per-charge order).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <pqxx/pqxx>

#include "child_process.hpp"
#include "kafka_test_topic.hpp"
#include "pg_test_database.hpp"
#include "service_process.hpp"

namespace charge_outbox::testing {

// One written event, as a test remembers it.
struct WrittenEvent {
  std::string id;
  std::string charge;  // aggregateid: ch_ + 32 hex
  int sequence = 0;
};

// Writes `charges` charges' events from `threads` connections at once: per charge an initiated event,
// then a captured one in a later transaction, and a third for every tenth charge, interleaved with the
// other charges of the same thread. Returns every event written.
std::vector<WrittenEvent> WriteChargeEvents(const std::string& database_url, int charges, int threads,
                                            int payload_bytes = 0);

// One event for a new or given charge; returns it.
WrittenEvent WriteEvent(const std::string& database_url, const std::string& charge_uuid, int sequence,
                        int payload_bytes = 0, const std::string& traceparent = "");

// Events written one at a time on one connection kept open, for a test that paces them closely.
class EventWriter {
 public:
  explicit EventWriter(const std::string& database_url);
  ~EventWriter();
  WrittenEvent Write(const std::string& charge_uuid, int sequence);

 private:
  std::unique_ptr<pqxx::connection> conn_;
};

std::string NewUuid();
std::string ChargeId(const std::string& uuid);  // the public id, as the charge store writes aggregateid

std::int64_t Unpublished(const PgTestDatabase& db);

// Whether a DDL statement's lock on the outbox (ACCESS EXCLUSIVE, as retention's DETACH and a migration's
// ALTER take it) is granted within `timeout`; the lock is released at once.
bool OutboxLockedWithin(const PgTestDatabase& db, std::chrono::milliseconds timeout);

// The value of an unlabelled (or exactly labelled, e.g. `name{retryability="never"}`) metric, or nullopt.
std::optional<double> MetricValue(std::uint16_t port, const std::string& series);

// Reads the topic from the beginning until every id in `expected` has arrived at least once, or timeout.
std::vector<ConsumedMessage> ConsumeAll(const KafkaTestTopic& topic, const std::vector<WrittenEvent>& expected,
                                        std::chrono::milliseconds timeout);

// The event id of a message: its ce_id header, or `id` in the value of a structured-mode one.
std::optional<std::string> EventId(const ConsumedMessage& m);

// Checks the delivery contract on what was consumed: every message conforms to the published event
// contract (its payload's JSON Schema and its CloudEvents attributes, EventContractViolations), every
// expected event arrived (by ce_id), and for each charge the first arrivals of its events ascend by
// sequence (duplicates allowed, reordering not). Returns a description of every violation (empty: none).
std::vector<std::string> ContractViolations(const std::vector<ConsumedMessage>& consumed,
                                            const std::vector<WrittenEvent>& expected);

// A single-node KRaft broker of the test's own, on free ports, driven through the kafka_start/kafka_stop
// functions of deploy/local/lib/kafka.sh that tests/run uses, from the jars tests/run already fetched.
// For a test that stops the broker or puts a FaultProxy in front of it (`advertised_port`: the port the
// broker tells clients to use, the proxy's), never touching the shared broker of the other suites.
class OwnBroker {
 public:
  OwnBroker();
  ~OwnBroker();
  OwnBroker(const OwnBroker&) = delete;
  OwnBroker& operator=(const OwnBroker&) = delete;

  void Start(int advertised_port = 0);
  void Stop();
  int port() const { return port_; }
  std::string bootstrap() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  std::string state_;
  int port_;
  int cport_;
};

class RelayE2E {
 public:
  RelayE2E(const std::string& test_name, int partitions = 6);

  // The relay as a user starts it, on port 0, with short intervals unless `extra` says otherwise.
  std::unique_ptr<ServiceProcess> StartRelay(const EnvChanges& extra = {}) const;
  ProcessResult RunCommand(const std::vector<std::string>& args, const EnvChanges& extra = {}) const;

  EnvChanges BaseEnv() const;
  PgTestDatabase& db() { return *db_; }
  KafkaTestTopic& topic() { return *topic_; }

 private:
  std::unique_ptr<PgTestDatabase> db_;
  std::unique_ptr<KafkaTestTopic> topic_;
};

}  // namespace charge_outbox::testing
