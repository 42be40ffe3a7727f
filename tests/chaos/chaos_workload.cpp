#include "chaos_workload.hpp"

#include <boost/json/parse.hpp>

#include <algorithm>
#include <random>
#include <thread>

#include "charge_outbox/retry/backoff.hpp"
#include "charge_outbox/util/random.hpp"
#include "http_test_client.hpp"

namespace charge_outbox::chaos {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::string Str(const boost::json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  return v != nullptr && v->is_string() ? std::string(v->as_string()) : std::string();
}

// What an exchange came to, for the answers table.
std::string Label(const testing::HttpResult& r) {
  if (r.ok()) return std::to_string(r.status());
  if (r.error == boost::beast::error::timeout) return "timeout";
  if (r.error == boost::asio::error::connection_refused) return "refused";
  if (r.error == boost::beast::http::error::end_of_stream || r.error == boost::asio::error::connection_reset ||
      r.error == boost::asio::error::eof) {
    return "dropped";
  }
  return "error";
}

}  // namespace

Workload::Workload(ChaosStack& stack, WorkloadOptions options, std::uint64_t seed)
    : stack_(stack), options_(options), seed_(seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const auto& merchants = stack.merchants();
  outcomes_.resize(static_cast<std::size_t>(options.charges));
  for (int i = 0; i < options.charges; ++i) {
    auto& intent = outcomes_[static_cast<std::size_t>(i)].intent;
    const auto& merchant = merchants[rng() % merchants.size()];
    intent.merchant_id = merchant.id;
    intent.api_key = merchant.api_key;
    intent.key = "chaos-" + std::to_string(seed) + "-" + std::to_string(i);
    intent.amount = 100 + static_cast<std::int64_t>(rng() % 100'000);
    intent.payment_method = unit(rng) < options.decline_share ? "pm_tok_declined" : "pm_tok_visa";
  }
}

void Workload::Run() {
  std::vector<std::thread> clients;
  for (int c = 0; c < options_.clients; ++c) clients.emplace_back([this, c] { Client(c); });
  for (auto& t : clients) t.join();
}

void Workload::Client(int client_index) {
  for (;;) {
    const int i = next_++;
    if (i >= options_.charges) return;
    constexpr std::uint64_t kSpread = 0x9E3779B97F4A7C15;
    const auto intent_seed = seed_ ^ (static_cast<std::uint64_t>(i) * kSpread) ^ static_cast<std::uint64_t>(client_index);
    Drive(outcomes_[static_cast<std::size_t>(i)], intent_seed);
    ++done_;
  }
}

void Workload::Drive(IntentOutcome& outcome, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const auto& intent = outcome.intent;
  const auto body = R"({"amount": )" + std::to_string(intent.amount) +
                    R"(, "currency": "BRL", "order_id": "O-)" + intent.key + R"(", "payment_method": ")" +
                    intent.payment_method + R"("})";
  const testing::HttpHeaders headers{{"Authorization", "Bearer " + intent.api_key},
                                     {"Content-Type", "application/json"},
                                     {"Idempotency-Key", intent.key}};
  const auto ports = stack_.ApiPorts();
  const auto give_up_at = Clock::now() + options_.give_up;
  // Full jitter from 100 ms, capped at 2 s; never sooner than the server asked. Its own stream of the
  // intent's seed, so a seed replays the waits too.
  const retry::Backoff schedule(
      retry::BackoffOptions{std::chrono::milliseconds{100}, std::chrono::milliseconds{2000}});
  util::Mt19937RandomSource jitter(seed ^ 0x5851F42D4C957F2DULL);
  int failures = 0;
  auto backoff = [&](std::optional<std::chrono::milliseconds> at_least = std::nullopt) {
    std::this_thread::sleep_for(schedule.Next(failures++, jitter, {}, at_least).delay);
  };
  auto retry_after = [](const testing::HttpResult& r) -> std::optional<std::chrono::milliseconds> {
    const auto value = r.header("Retry-After");
    if (value.empty()) return std::nullopt;
    return std::chrono::milliseconds{std::min(5, std::max(0, std::atoi(value.c_str()))) * 1000};
  };
  auto count = [&](const std::string& label) {
    std::lock_guard lock(answers_mutex_);
    ++answers_[label];
  };

  while (Clock::now() < give_up_at) {
    testing::HttpTestClient client(ports[rng() % ports.size()], "127.0.0.1", options_.request_timeout);
    const auto r = client.Post("/v1/charges", body, headers);
    ++outcome.attempts;
    count(Label(r));
    if (!r.ok()) {
      backoff();
      continue;
    }
    const auto status = r.status();
    if (status == 201u || status == 402u || status == 202u) {
      boost::system::error_code ec;
      const auto parsed = boost::json::parse(r.response.body(), ec);
      const auto* o = ec ? nullptr : parsed.if_object();
      if (o == nullptr) {
        count("unparseable");
        backoff();
        continue;
      }
      const auto id = status == 402u ? Str(*o, "charge_id") : Str(*o, "id");
      if (!id.empty()) outcome.charge_id = id;
      const auto told = status == 402u ? Str(*o, "charge_status") : Str(*o, "status");
      outcome.told.push_back(told);
      if (status != 202u || told == "needs_review") {
        outcome.final_status = static_cast<int>(status);
        outcome.final_charge_status = told;
        return;
      }
      // 202 pending: poll GET for a while (a client that waits), or retry the same POST (one that insists).
      if (unit(rng) < 0.5 && !outcome.charge_id.empty()) {
        for (int polls = 0; polls < 5 && Clock::now() < give_up_at; ++polls) {
          std::this_thread::sleep_for(std::chrono::milliseconds{200 + static_cast<int>(unit(rng) * 300)});
          testing::HttpTestClient poller(ports[rng() % ports.size()], "127.0.0.1", options_.request_timeout);
          const auto got = poller.Get("/v1/charges/" + outcome.charge_id,
                                      {{"Authorization", "Bearer " + intent.api_key}});
          count("GET " + Label(got));
          if (!got.ok() || got.status() != 200u) continue;
          const auto state = Str(got.json().as_object(), "status");
          if (state == "pending") continue;
          outcome.told.push_back(state);
          outcome.final_charge_status = state;
          return;
        }
      }
      backoff();
      continue;
    }
    if (status == 409u || status == 429u || status >= 500u) {
      backoff(retry_after(r));
      continue;
    }
    // 400, 401, 404, 422: a client bug or a server bug; either way nothing a retry can fix.
    outcome.told.push_back("http " + std::to_string(status));
    outcome.final_status = static_cast<int>(status);
    return;
  }
  outcome.gave_up = true;
}

std::map<std::string, std::int64_t> Workload::answers() const {
  std::lock_guard lock(answers_mutex_);
  return answers_;
}

}  // namespace charge_outbox::chaos
