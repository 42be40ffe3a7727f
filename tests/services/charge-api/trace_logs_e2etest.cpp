// Issue 14, defect 6: a log line carries the trace id of the request it is about, even when many
// requests interleave on the same I/O threads across their suspension points (database jobs, acquirer
// calls, backoff sleeps). Before, the trace id was a thread's, held across co_await: a line could carry
// whichever request had last run on that thread.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

#include <filesystem>
#include <future>
#include <map>
#include <sstream>
#include <vector>

#include "charge_stack.hpp"
#include "http_test_client.hpp"
#include "pg_test_database.hpp"
#include "service_process.hpp"
#include "test_env.hpp"

namespace charge_outbox::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr const char* kMerchant = "00000000-0000-4000-8000-0000000000c1";
constexpr const char* kApiKey = "sk_test_trace_logs";
constexpr const char* kAcquirerKey = "ak_test_trace_logs";

std::string TraceIdOf(int i) {
  char id[33];
  std::snprintf(id, sizeof id, "%032x", 0xabc000 + i);
  return id;
}

TEST(TraceLogsE2E, InterleavedRequestsLogUnderTheirOwnTraceIds) {
  const auto db = PgTestDatabase::Create("trace_logs", PgTestDatabase::Schema::kMigrated);
  InsertMerchant(*db, kMerchant, kApiKey);
  const auto dir = fs::temp_directory_path() / UniqueName("trace_logs_e2e");
  const int sim_port = FreeLoopbackPort();
  ServiceProcess sim({ACQUIRER_SIM_BIN}, EnvChanges{{"SERVER_PORT", std::to_string(sim_port)},
                                                    {"DATA_DIR", (dir / "sim").string()},
                                                    {"AUTH_API_KEYS", kAcquirerKey}});
  HttpTestClient sim_client(static_cast<std::uint16_t>(sim_port));
  // Every capture outlives the 1 s call timeout: each request times out, retries after a backoff, and
  // logs that its charge stays pending, all while the others run on the same two threads.
  ASSERT_EQ(sim_client.Put("/admin/faults", R"({"latency": {"distribution": "fixed", "ms": 1500}})").status(), 200u);
  auto env = FastChargeApiEnv(db->url(), sim_port, kAcquirerKey);
  env["HTTP_THREADS"] = "2";
  env["ACQUIRER_POOL_MAX_CONNECTIONS"] = "32";  // no request waits in our own queue
  ServiceProcess api({CHARGE_API_BIN}, env);

  constexpr int kRequests = 24;
  std::vector<std::future<HttpResult>> answers;
  for (int i = 0; i < kRequests; ++i) {
    answers.push_back(std::async(std::launch::async, [&, i] {
      HttpTestClient client(api.port(), "127.0.0.1", 30s);
      return client.Post(
          "/v1/charges",
          R"({"amount": 1000, "currency": "BRL", "order_id": "PED-1", "payment_method": "pm_tok_visa"})",
          {{"Authorization", std::string("Bearer ") + kApiKey},
           {"Content-Type", "application/json"},
           {"Idempotency-Key", "trace-" + std::to_string(i)},
           {"traceparent", "00-" + TraceIdOf(i) + "-00000000000000a1-01"}});
    }));
  }
  std::map<std::string, std::string> trace_of_charge;  // public id -> the trace id its request sent
  for (int i = 0; i < kRequests; ++i) {
    const auto r = answers[static_cast<std::size_t>(i)].get();
    // 202 pending as a rule; on a starved machine a connect can time out too (402, no money taken).
    // Whatever the outcome, the answer names the charge, and that is what the log lines are checked by.
    ASSERT_TRUE(r.ok()) << "request " << i << " got no answer";
    const auto body = boost::json::parse(r.response.body()).as_object();
    const auto* id = body.contains("id") ? body.if_contains("id") : body.if_contains("charge_id");
    ASSERT_NE(id, nullptr) << r.response.body();
    trace_of_charge[std::string(id->as_string())] = TraceIdOf(i);
  }

  std::map<std::string, int> lines_of_charge;
  std::istringstream output(api.Output());
  for (std::string line; std::getline(output, line);) {
    if (line.empty() || line.front() != '{') continue;
    const auto entry = boost::json::parse(line).as_object();
    const std::string msg(entry.at("msg").as_string());
    for (const auto& [charge, trace] : trace_of_charge) {
      if (msg.find(charge) == std::string::npos) continue;
      ++lines_of_charge[charge];
      ASSERT_TRUE(entry.contains("trace_id")) << line;
      EXPECT_EQ(entry.at("trace_id").as_string(), trace) << line;
    }
  }
  // Each request did log about its charge (the assertion above is not vacuous).
  EXPECT_EQ(lines_of_charge.size(), trace_of_charge.size());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace charge_outbox::testing
