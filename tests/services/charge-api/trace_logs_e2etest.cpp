// Issue 14, defect 6: a log line carries the trace id of the request it is about, even when many
// requests interleave on the same I/O threads across their suspension points (database jobs, acquirer
// calls, backoff sleeps). Before, the trace id was a thread's, held across co_await: a line could carry
// whichever request had last run on that thread.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <regex>
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

// POST /v1/charges with `key`, sending `trace_id` in its traceparent; the same body for every key, so a
// retry with the same key is the same request.
HttpResult PostCharge(std::uint16_t port, const std::string& key, const std::string& trace_id) {
  HttpTestClient client(port, "127.0.0.1", 30s);
  return client.Post(
      "/v1/charges", R"({"amount": 1000, "currency": "BRL", "order_id": "PED-1", "payment_method": "pm_tok_visa"})",
      {{"Authorization", std::string("Bearer ") + kApiKey},
       {"Content-Type", "application/json"},
       {"Idempotency-Key", key},
       {"traceparent", "00-" + trace_id + "-00000000000000a1-01"}});
}

// The public id an answer names (a charge's `id`, a problem's `charge_id`), if any.
std::optional<std::string> ChargeNamedBy(const HttpResult& r) {
  const auto body = boost::json::parse(r.response.body()).as_object();
  const auto* id = body.contains("id") ? body.if_contains("id") : body.if_contains("charge_id");
  if (id == nullptr) return std::nullopt;
  return std::string(id->as_string());
}

// The daemon's JSON log lines, in order.
std::vector<boost::json::object> LogLines(const std::string& output) {
  std::vector<boost::json::object> lines;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.front() == '{') lines.push_back(boost::json::parse(line).as_object());
  }
  return lines;
}

// A fresh database with the merchant, acquirer-sim, and charge-api on two I/O threads against both.
class TraceLogsE2E : public ::testing::Test {
 protected:
  // `api_env` is added to the fast environment every test here shares.
  void Start(const std::string& suite, const EnvChanges& api_env) {
    db_ = PgTestDatabase::Create(suite, PgTestDatabase::Schema::kMigrated);
    InsertMerchant(*db_, kMerchant, kApiKey);
    dir_ = fs::temp_directory_path() / UniqueName(suite + "_e2e");
    const int sim_port = FreeLoopbackPort();
    sim_.emplace(std::vector<std::string>{ACQUIRER_SIM_BIN},
                 EnvChanges{{"HTTP_PORT", std::to_string(sim_port)},
                            {"DATA_DIR", (dir_ / "sim").string()},
                            {"AUTH_API_KEYS", kAcquirerKey}});
    sim_client_.emplace(static_cast<std::uint16_t>(sim_port));
    auto env = FastChargeApiEnv(db_->url(), sim_port, kAcquirerKey);
    env["HTTP_THREADS"] = "2";
    for (const auto& [name, value] : api_env) env[name] = value;
    api_.emplace(std::vector<std::string>{CHARGE_API_BIN}, env);
  }

  void TearDown() override {
    api_.reset();
    sim_.reset();
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  // acquirer-sim's whole fault profile (PUT /admin/faults).
  void SetFaults(const std::string& profile) {
    ASSERT_EQ(sim_client_->Put("/admin/faults", profile).status(), 200u) << profile;
  }

  std::unique_ptr<PgTestDatabase> db_;
  fs::path dir_;
  std::optional<ServiceProcess> sim_;
  std::optional<HttpTestClient> sim_client_;
  std::optional<ServiceProcess> api_;
};

TEST_F(TraceLogsE2E, InterleavedRequestsLogUnderTheirOwnTraceIds) {
  Start("trace_logs", {{"ACQUIRER_POOL_MAX_CONNECTIONS", "32"}});  // no request waits in our own queue
  // Every capture outlives the 1 s call timeout: each request times out, retries after a backoff, and
  // logs that its charge stays pending, all while the others run on the same two threads.
  ASSERT_NO_FATAL_FAILURE(SetFaults(R"({"latency": {"distribution": "fixed", "ms": 1500}})"));
  const auto& api = *api_;

  constexpr int kRequests = 24;
  std::vector<std::future<HttpResult>> answers;
  for (int i = 0; i < kRequests; ++i) {
    answers.push_back(std::async(std::launch::async, [&, i] {
      return PostCharge(api.port(), "trace-" + std::to_string(i), TraceIdOf(i));
    }));
  }
  std::map<std::string, std::string> trace_of_charge;  // public id -> the trace id its request sent
  for (int i = 0; i < kRequests; ++i) {
    const auto r = answers[static_cast<std::size_t>(i)].get();
    // 202 pending as a rule; on a starved machine a connect can time out too (402, no money taken).
    // Whatever the outcome, the answer names the charge, and that is what the log lines are checked by.
    ASSERT_TRUE(r.ok()) << "request " << i << " got no answer";
    const auto charge = ChargeNamedBy(r);
    ASSERT_TRUE(charge.has_value()) << r.response.body();
    trace_of_charge[*charge] = TraceIdOf(i);
  }

  std::map<std::string, int> lines_of_charge;
  for (const auto& entry : LogLines(api.Output())) {
    const std::string msg(entry.at("msg").as_string());
    for (const auto& [charge, trace] : trace_of_charge) {
      if (msg.find(charge) == std::string::npos) continue;
      ++lines_of_charge[charge];
      ASSERT_TRUE(entry.contains("trace_id")) << boost::json::serialize(entry);
      EXPECT_EQ(entry.at("trace_id").as_string(), trace) << boost::json::serialize(entry);
    }
  }
  // Each request did log about its charge (the assertion above is not vacuous).
  EXPECT_EQ(lines_of_charge.size(), trace_of_charge.size());
}

// Retries of pending charges take them over: each asks the acquirer by key, finds the capture and settles
// the charge, while fresh charges capture beside them. Before, TakeOver and Settle held their trace id on
// the thread across the settle's database call: the other requests on that I/O thread logged under it
// meanwhile, and where the request resumed on the other thread, its scope's end left a stale trace id
// behind, which later lines of other requests on that thread carried. The acquirer client logs each call
// (at debug) with its request id, which the attempts table ties to a charge, so every line that carries a
// trace id is checked, not only the lines naming a charge; a line outside any request's scope rightly
// carries none.
TEST_F(TraceLogsE2E, TakeoversAndSettlesLendTheirTraceIdToNoOtherRequest) {
  Start("trace_takeovers", {{"ACQUIRER_POOL_MAX_CONNECTIONS", "64"},  // no request waits in our own queue
                            {"LOG_LEVEL", "debug"}});                // a line per acquirer call
  // First, every capture is done at the acquirer but its answer is lost (the retry's replay too): the
  // charges stay pending with their leases given back, so the next request for each takes it over.
  ASSERT_NO_FATAL_FAILURE(SetFaults(R"({"drop_rate": 1, "apply_to": ["capture", "replay"]})"));
  const auto& api = *api_;

  constexpr int kTakeovers = 16;
  constexpr int kFresh = 16;
  const auto first_trace = [](int i) { return TraceIdOf(0x100 + i); };
  const auto retry_trace = [](int i) { return TraceIdOf(0x200 + i); };
  const auto fresh_trace = [](int i) { return TraceIdOf(0x300 + i); };
  const auto key = [](const char* kind, int i) { return std::string(kind) + "-" + std::to_string(i); };
  const auto post = [&api](std::string k, std::string trace_id) {
    return std::async(std::launch::async, [&api, k, trace_id] { return PostCharge(api.port(), k, trace_id); });
  };

  std::vector<std::future<HttpResult>> firsts;
  for (int i = 0; i < kTakeovers; ++i) {
    firsts.push_back(post(key("takeover", i), first_trace(i)));
  }
  // Public id -> the trace id of the request that handled the charge, in each phase.
  std::map<std::string, std::string> first_trace_of, second_trace_of;
  std::map<int, std::string> pending;  // takeover index -> its charge, answered pending
  for (int i = 0; i < kTakeovers; ++i) {
    const auto r = firsts[static_cast<std::size_t>(i)].get();
    ASSERT_TRUE(r.ok()) << "request " << i << " got no answer";
    const auto charge = ChargeNamedBy(r);
    ASSERT_TRUE(charge.has_value()) << r.response.body();
    first_trace_of[*charge] = first_trace(i);
    // 202 as a rule; on a starved machine a connect can time out instead (402, nothing to take over).
    if (r.status() == 202) pending[i] = *charge;
  }
  ASSERT_GE(pending.size(), std::size_t{kTakeovers / 2}) << "too few charges left pending to take over";
  // Every request of the first phase has answered, and answers after its last line.
  const auto first_phase_lines = LogLines(api.Output()).size();

  // Then the acquirer answers every capture and lookup after 50-400 ms: the takeovers' lookups and settles
  // and the fresh charges' captures overlap on the two I/O threads.
  ASSERT_NO_FATAL_FAILURE(SetFaults(R"({"latency": {"distribution": "uniform", "min_ms": 50, "max_ms": 400},)"
                                    R"( "apply_to": ["capture", "lookup"]})"));
  std::vector<std::future<HttpResult>> retries;
  std::vector<std::future<HttpResult>> fresh;
  for (const auto& [i, charge] : pending) {
    retries.push_back(post(key("takeover", i), retry_trace(i)));
    second_trace_of[charge] = retry_trace(i);
  }
  for (int j = 0; j < kFresh; ++j) {
    fresh.push_back(post(key("fresh", j), fresh_trace(j)));
  }
  for (auto& answer : retries) ASSERT_TRUE(answer.get().ok());
  for (int j = 0; j < kFresh; ++j) {
    const auto r = fresh[static_cast<std::size_t>(j)].get();
    ASSERT_TRUE(r.ok()) << "fresh request " << j << " got no answer";
    const auto charge = ChargeNamedBy(r);
    ASSERT_TRUE(charge.has_value()) << r.response.body();
    second_trace_of[*charge] = fresh_trace(j);
  }
  // The retries did go through TakeOver (each looked its charge up) and Settle (the captures were found).
  EXPECT_EQ(db_->Scalar("SELECT count(DISTINCT charge_id) FROM acquirer_attempts WHERE operation = 'lookup'"),
            std::to_string(pending.size()));
  EXPECT_NE(db_->Scalar("SELECT count(*) FROM charges WHERE idempotency_key LIKE 'takeover-%' AND status = 'captured'"),
            "0");

  std::map<std::string, std::string> charge_of_request;  // acquirer request id -> public id
  {
    std::istringstream pairs(db_->Scalar(
        "SELECT string_agg(request_id::text || ' ' || charge_public_id(charge_id), ' ') FROM acquirer_attempts"));
    for (std::string request, charge; pairs >> request >> charge;) charge_of_request[request] = charge;
  }
  const std::regex acquirer_call(R"(^acquirer \w+ request_id=([0-9a-f-]+) )");
  const auto lines = LogLines(api.Output());
  std::size_t calls_logged = 0;
  std::vector<std::string> misattributed;
  for (std::size_t n = 0; n < lines.size(); ++n) {
    const auto& trace_of = n < first_phase_lines ? first_trace_of : second_trace_of;
    const auto& entry = lines[n];
    const std::string msg(entry.at("msg").as_string());
    const auto* trace = entry.if_contains("trace_id");
    const auto check = [&](const std::string& want) {
      if (trace == nullptr || trace->as_string() != want) {
        misattributed.push_back(boost::json::serialize(entry) + " (its request's trace id: " + want + ")");
      }
    };
    for (const auto& [charge, want] : trace_of) {
      if (msg.find(charge) != std::string::npos) check(want);
    }
    std::smatch call;
    if (!std::regex_search(msg, call, acquirer_call)) continue;
    ++calls_logged;
    if (trace == nullptr) continue;
    const auto charge = charge_of_request.find(call[1].str());
    if (charge == charge_of_request.end() || !trace_of.contains(charge->second)) {
      misattributed.push_back(boost::json::serialize(entry) + " (a trace id on no known request's call)");
    } else {
      check(trace_of.at(charge->second));
    }
  }
  // Every request called the acquirer at least once, so the check above saw the lines it is about.
  EXPECT_GE(calls_logged, std::size_t{kTakeovers} + pending.size() + kFresh);
  std::string shown;
  for (std::size_t n = 0; n < misattributed.size() && n < 5; ++n) shown += misattributed[n] + "\n";
  EXPECT_TRUE(misattributed.empty()) << misattributed.size() << " of " << lines.size()
                                     << " log lines carry another request's trace id, or none; the first:\n"
                                     << shown;
}

}  // namespace
}  // namespace charge_outbox::testing
