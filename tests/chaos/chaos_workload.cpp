#include "chaos_workload.hpp"

#include <boost/json/parse.hpp>

#include <algorithm>
#include <optional>
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

// What an answer's words claim about the key's charge, for the checker to hold against the ledger.
std::optional<std::string> ClaimOf(const boost::json::object& body, unsigned status) {
  if (status == 202u && Str(body, "status") == "needs_review") return "under_review";
  const auto detail = Str(body, "detail");
  if (detail.find("othing was charged") != std::string::npos || detail.find("o money was taken") != std::string::npos ||
      detail.find("declined the payment") != std::string::npos) {
    return "no_money";
  }
  return std::nullopt;
}

void NoteClaim(const testing::HttpResult& r, std::vector<std::string>& claims) {
  if (!r.ok()) return;
  boost::system::error_code ec;
  const auto parsed = boost::json::parse(r.response.body(), ec);
  if (ec || !parsed.is_object()) return;
  if (auto claim = ClaimOf(parsed.as_object(), r.status())) claims.push_back(std::move(*claim));
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
  outcomes_.resize(2 * static_cast<std::size_t>(options.charges));
  for (int i = options.charges; i < 2 * options.charges; ++i) outcomes_[static_cast<std::size_t>(i)].used = false;
  for (int i = 0; i < options.charges; ++i) {
    auto& intent = outcomes_[static_cast<std::size_t>(i)].intent;
    const auto& merchant = merchants[rng() % merchants.size()];
    intent.merchant_id = merchant.id;
    intent.api_key = merchant.api_key;
    intent.key = "chaos-" + std::to_string(seed) + "-" + std::to_string(i);
    intent.amount = 100 + static_cast<std::int64_t>(rng() % 100'000);
    intent.payment_method = unit(rng) < options.decline_share ? "pm_tok_declined" : "pm_tok_visa";
    intent.order_id = "O-" + intent.key;
  }
}

void Workload::Run() {
  started_ = std::chrono::steady_clock::now();
  std::vector<std::thread> clients;
  for (int c = 0; c < options_.clients; ++c) clients.emplace_back([this, c] { Client(c); });
  for (auto& t : clients) t.join();
}

void Workload::Client(int client_index) {
  for (;;) {
    const int i = next_++;
    if (i >= options_.charges) return;
    std::this_thread::sleep_until(started_ + std::chrono::milliseconds{options_.spread} * i / options_.charges);
    constexpr std::uint64_t kSpread = 0x9E3779B97F4A7C15;
    const auto intent_seed = seed_ ^ (static_cast<std::uint64_t>(i) * kSpread) ^ static_cast<std::uint64_t>(client_index);
    std::mt19937_64 rng(intent_seed ^ 0xD1B54A32D192ED03ULL);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    auto& first = outcomes_[static_cast<std::size_t>(i)];
    Drive(first, intent_seed, unit(rng) < options_.walk_away_share);
    // Only after an answer definitive for the key that says no money was kept may the order start over.
    const bool no_money = (first.final_status == 402) ||
                          (!first.final_status && (first.final_charge_status == "failed" ||
                                                   first.final_charge_status == "canceled"));
    if (no_money && unit(rng) < options_.restart_share) {
      first.started_over = true;
      auto& again = outcomes_[static_cast<std::size_t>(i + options_.charges)];
      again.used = true;
      again.intent = first.intent;
      again.intent.key = first.intent.key + "-again";
      again.intent.payment_method = "pm_tok_visa";  // another card, this time
      Drive(again, intent_seed ^ 0x2545F4914F6CDD1DULL, false);
    }
    ++done_;
  }
}

void Workload::Drive(IntentOutcome& outcome, std::uint64_t seed, bool walks_away) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const auto& intent = outcome.intent;
  const auto body = R"({"amount": )" + std::to_string(intent.amount) +
                    R"(, "currency": "BRL", "order_id": ")" + intent.order_id + R"(", "payment_method": ")" +
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

  std::optional<Clock::time_point> first_sent;
  while (Clock::now() < give_up_at) {
    testing::HttpTestClient client(ports[rng() % ports.size()], "127.0.0.1", options_.request_timeout);
    const auto sent = Clock::now();
    if (!first_sent) first_sent = sent;
    const auto r = client.Post("/v1/charges", body, headers);
    const auto answered = Clock::now();
    ++outcome.attempts;
    const auto label = Label(r);
    std::string answer = label;
    if (label == "503") {
      // Which 503: the database's, or our own acquirer queue's before or after the charge's intent.
      boost::system::error_code ec;
      const auto problem = boost::json::parse(r.response.body(), ec);
      const auto* o = ec ? nullptr : problem.if_object();
      const auto type = o == nullptr ? std::string() : Str(*o, "type");
      answer = "503 " + type.substr(type.rfind(':') + 1) + (o != nullptr && o->contains("charge_id") ? " (after the intent)" : "");
    }
    count(answer);
    {
      std::lock_guard lock(answers_mutex_);
      attempts_.push_back(Attempt{sent, answered, answer, *first_sent});
    }
    const bool refusal = label == "refused" || label == "503" || label == "429";
    if (!refusal) outcome.only_told_to_retry = false;
    NoteClaim(r, outcome.claims);
    if (walks_away && (label == "503" || label == "429")) {
      outcome.walked_away = true;
      outcome.gave_up = true;
      return;
    }
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
      outcome.told_at.push_back(answered);
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
          NoteClaim(got, outcome.claims);  // a GET's words are about the same charge (a 503, say)
          if (!got.ok() || got.status() != 200u) continue;
          const auto state = Str(got.json().as_object(), "status");
          if (state == "pending") continue;
          outcome.told.push_back(state);
          outcome.told_at.push_back(Clock::now());
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
    outcome.told_at.push_back(answered);
    outcome.final_status = static_cast<int>(status);
    return;
  }
  outcome.gave_up = true;
}

std::map<std::string, std::int64_t> Workload::answers() const {
  std::lock_guard lock(answers_mutex_);
  return answers_;
}

std::vector<Attempt> Workload::attempts() const {
  std::lock_guard lock(answers_mutex_);
  return attempts_;
}

}  // namespace charge_outbox::chaos
