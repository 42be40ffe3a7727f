// Where integration and e2e tests find the services `tests/run` started for them.
// A missing variable is a test failure with a hint, never a silent skip.
#pragma once

#include <string>

namespace charge_outbox::testing {

// The value of environment variable `name`; throws (failing the test) if unset or empty.
std::string RequiredEnv(const std::string& name);

// Admin URL of the test PostgreSQL server (a database we may CREATE DATABASE from).
inline std::string TestDatabaseAdminUrl() { return RequiredEnv("TEST_DATABASE_URL"); }
inline std::string KafkaBootstrapServers() { return RequiredEnv("KAFKA_BOOTSTRAP_SERVERS"); }

// A loopback TCP port free right now, below the kernel's ephemeral range (so an outgoing connection
// cannot take it while a test restarts the server that listens on it). Throws if none is found.
int FreeLoopbackPort();

// A name unique to this process and call, safe as a database or topic name: prefix_pid_counter_rand.
std::string UniqueName(const std::string& prefix);

}  // namespace charge_outbox::testing
