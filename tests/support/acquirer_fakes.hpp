// Fakes of the acquirer side, for unit tests of anything that calls the acquirer under a retry policy: an
// AcquirerClient that answers from a script and records what it was asked (and, from clock_fakes.hpp, a
// clock that sleeps by advancing itself and a random source that replays a script).
#pragma once

#include <boost/asio/awaitable.hpp>
#include <algorithm>
#include <chrono>
#include <optional>
#include <deque>
#include <stdexcept>
#include <string>
#include <vector>

#include "charge_outbox/acquirer/acquirer_client.hpp"
#include "charge_outbox/acquirer/retry_policy.hpp"
#include "clock_fakes.hpp"

namespace charge_outbox::acquirer::testing {

// The general fakes, named here as the acquirer suites always have.
using charge_outbox::testing::FakeClock;
using charge_outbox::testing::ScriptedRandom;

inline AttemptOutcome OutcomeOf(OutcomeKind kind, std::optional<std::chrono::seconds> retry_after = std::nullopt) {
  AttemptOutcome o;
  o.kind = kind;
  o.retry_after = retry_after;
  return o;
}

// Answers each call with the next scripted outcome; each answer may also advance a fake clock, to
// model how long the attempt took. Records every request and request id.
class ScriptedAcquirerClient final : public AcquirerClient {
 public:
  struct Step {
    AttemptOutcome outcome;
    std::chrono::milliseconds takes{0};
  };
  explicit ScriptedAcquirerClient(std::deque<Step> script, FakeClock* clock = nullptr)
      : script_(std::move(script)), clock_(clock) {}

  boost::asio::awaitable<AttemptOutcome> Capture(CaptureRequest request, std::string request_id) override {
    captures.push_back(request);
    co_return Next(Operation::kCapture, std::move(request_id));
  }
  boost::asio::awaitable<AttemptOutcome> LookupByKey(LookupRequest request, std::string request_id) override {
    lookups.push_back(request);
    co_return Next(Operation::kLookup, std::move(request_id));
  }
  boost::asio::awaitable<AttemptOutcome> Void(VoidRequest request, std::string request_id) override {
    voids.push_back(request);
    co_return Next(Operation::kVoid, std::move(request_id));
  }
  boost::asio::awaitable<AttemptOutcome> ListPage(ListWindow, std::optional<std::string> page_token,
                                                  std::string request_id) override {
    page_tokens.push_back(page_token);
    co_return Next(Operation::kList, std::move(request_id));
  }

  std::vector<CaptureRequest> captures;
  std::vector<LookupRequest> lookups;
  std::vector<VoidRequest> voids;
  std::vector<std::optional<std::string>> page_tokens;
  std::vector<std::string> request_ids;

 private:
  AttemptOutcome Next(Operation operation, std::string request_id) {
    if (script_.empty()) throw std::logic_error("ScriptedAcquirerClient: called more often than scripted");
    auto step = std::move(script_.front());
    script_.pop_front();
    request_ids.push_back(std::move(request_id));
    if (clock_ != nullptr) clock_->Advance(step.takes);
    step.outcome.operation = operation;
    return step.outcome;
  }

  std::deque<Step> script_;
  FakeClock* clock_;
};

}  // namespace charge_outbox::acquirer::testing
