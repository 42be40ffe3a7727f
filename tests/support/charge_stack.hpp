// What the end-to-end tests of charge-api and the reconciler both need around a running stack: a
// charge-api environment that resolves unknown outcomes in seconds, and acquirer-sim's ledger as the
// truth of what was captured. Header-only, like http_test_client.hpp.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "child_process.hpp"
#include "http_test_client.hpp"
#include "pg_test_database.hpp"

namespace charge_outbox::testing {

// A process that calls acquirer-sim on `acquirer_port` as a client (the reconciler, charge-admin), with
// short acquirer timeouts (1 s a request, two tries, 1 s of backoff budget), and no failpoints unless the
// test adds them.
inline EnvChanges FastAcquirerClientEnv(const std::string& database_url, int acquirer_port,
                                        const std::string& acquirer_api_key) {
  return EnvChanges{{"DATABASE_URL", database_url},
                    {"ACQUIRER_URL", "http://127.0.0.1:" + std::to_string(acquirer_port)},
                    {"ACQUIRER_API_KEY", acquirer_api_key},
                    {"ACQUIRER_REQUEST_TIMEOUT", "1s"},
                    {"ACQUIRER_RETRY_MAX_ATTEMPTS", "2"},
                    {"ACQUIRER_RETRY_BACKOFF_BASE", "50ms"},
                    {"ACQUIRER_RETRY_BACKOFF_MAX", "100ms"},
                    {"ACQUIRER_RETRY_BACKOFF_BUDGET", "1s"},
                    {"FAILPOINTS", std::nullopt}};
}

// charge-api against acquirer-sim on `acquirer_port`, with short acquirer timeouts and lease so that
// unknown outcomes and dead owners resolve in seconds, and no failpoints unless the test adds them.
inline EnvChanges FastChargeApiEnv(const std::string& database_url, int acquirer_port,
                                   const std::string& acquirer_api_key) {
  auto env = FastAcquirerClientEnv(database_url, acquirer_port, acquirer_api_key);
  env["HTTP_ADDRESS"] = "127.0.0.1";
  env["HTTP_PORT"] = "0";
  env["ADMIN_ADDRESS"] = "127.0.0.1";
  env["ADMIN_PORT"] = "0";
  env["CHARGE_LEASE"] = "3s";
  env["SHUTDOWN_DEADLINE"] = "2s";
  return env;
}

// A merchant and its API key, stored hashed as charge-api expects.
inline void InsertMerchant(const PgTestDatabase& db, const std::string& merchant_id, const std::string& api_key) {
  db.Execute("INSERT INTO merchants (id, name) VALUES ('" + merchant_id + "', 'merchant " + merchant_id + "')");
  db.Execute("INSERT INTO api_keys (key_hash, merchant_id, key_prefix) VALUES (sha256(convert_to('" + api_key +
             "', 'UTF8')), '" + merchant_id + "', 'sk_test')");
}

// acquirer-sim's ledger entries (`/admin/ledger`), oldest first.
inline boost::json::array AcquirerLedger(HttpTestClient& sim) {
  return sim.Get("/admin/ledger").json().at("entries").as_array();
}

// How many ledger entries of `type` ("capture", "void", ...) carry this acquirer idempotency key.
inline std::size_t AcquirerLedgerCount(HttpTestClient& sim, std::string_view type, std::string_view acquirer_key) {
  std::size_t n = 0;
  for (const auto& e : AcquirerLedger(sim)) {
    const auto& o = e.as_object();
    if (o.at("type").as_string() == type && o.at("idempotency_key").as_string() == acquirer_key) ++n;
  }
  return n;
}

}  // namespace charge_outbox::testing
