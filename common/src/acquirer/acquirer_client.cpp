#include "charge_outbox/acquirer/acquirer_client.hpp"

#include <set>

namespace charge_outbox::acquirer {

namespace asio = boost::asio;

namespace {

// One operation of `client` under `policy`, with the same request (so the same idempotency key) in every
// attempt. The lambda is not a coroutine: each call copies its arguments into the client's coroutine
// frame at once, so nothing refers to the lambda after it returns.
template <class Request>
asio::awaitable<RetryRun> WithRetries(AcquirerClient& client,
                                      asio::awaitable<AttemptOutcome> (AcquirerClient::*operation)(Request, std::string),
                                      Request request, const RetryPolicy& policy, util::Clock& clock,
                                      AttemptObserver* observer) {
  co_return co_await RunWithRetries(
      policy, clock,
      [&client, operation, &request](AttemptContext attempt) { return (client.*operation)(request, attempt.request_id); },
      observer);
}

}  // namespace

// Not coroutines: each hands back WithRetries' awaitable, which owns the request.
asio::awaitable<RetryRun> CaptureWithRetries(AcquirerClient& client, CaptureRequest request, const RetryPolicy& policy,
                                             util::Clock& clock, AttemptObserver* observer) {
  return WithRetries(client, &AcquirerClient::Capture, std::move(request), policy, clock, observer);
}

asio::awaitable<RetryRun> LookupWithRetries(AcquirerClient& client, LookupRequest request, const RetryPolicy& policy,
                                            util::Clock& clock, AttemptObserver* observer) {
  return WithRetries(client, &AcquirerClient::LookupByKey, std::move(request), policy, clock, observer);
}

asio::awaitable<RetryRun> VoidWithRetries(AcquirerClient& client, VoidRequest request, const RetryPolicy& policy,
                                          util::Clock& clock, AttemptObserver* observer) {
  return WithRetries(client, &AcquirerClient::Void, std::move(request), policy, clock, observer);
}

asio::awaitable<ListResult> VisitWindowPages(AcquirerClient& client, ListWindow window, const RetryPolicy& policy,
                                             util::Clock& clock, PageVisitor visit) {
  ListResult result;
  std::optional<std::string> token;
  std::set<std::string> seen_tokens;
  for (;;) {
    auto run = co_await RunWithRetries(policy, clock, [&client, &window, &token](AttemptContext attempt) {
      return client.ListPage(window, token, attempt.request_id);
    });
    auto& outcome = run.attempts.back().outcome;
    if (outcome.kind != OutcomeKind::kPage) {
      result.end = ListEnd::kPageFailed;
      result.failed_page = std::move(run);
      co_return result;
    }
    ++result.pages;
    auto next = std::move(outcome.next_page_token);
    const bool go_on = co_await visit(std::move(outcome.page));
    if (!go_on) {
      result.end = ListEnd::kStopped;
      co_return result;
    }
    if (!next.has_value()) {
      result.end = ListEnd::kComplete;
      co_return result;
    }
    if (!seen_tokens.insert(*next).second) {
      result.end = ListEnd::kTokenRepeated;
      co_return result;
    }
    token = std::move(next);
  }
}

asio::awaitable<ListResult> ListByWindow(AcquirerClient& client, ListWindow window, const RetryPolicy& policy,
                                         util::Clock& clock) {
  std::vector<Capture> captures;
  auto result = co_await VisitWindowPages(client, window, policy, clock,
                                          [&captures](std::vector<Capture> page) -> asio::awaitable<bool> {
                                            for (auto& capture : page) captures.push_back(std::move(capture));
                                            co_return true;
                                          });
  result.captures = std::move(captures);
  co_return result;
}

asio::awaitable<CredentialCheck> CheckCredentials(AcquirerClient& client) {
  CredentialCheck check;
  const auto request_id = NewRequestId();
  // Named: GCC 12 destroys a non-trivial temporary of a co_await expression twice.
  LookupRequest probe{"credential-check-" + request_id, std::nullopt};
  auto looked = client.LookupByKey(std::move(probe), request_id);
  check.outcome = co_await std::move(looked);
  const auto status = check.outcome.http_status.value_or(0);
  if (check.outcome.kind == OutcomeKind::kNotFound || check.outcome.kind == OutcomeKind::kCaptured) {
    check.verdict = Credentials::kAccepted;
  } else if (status == 401 || status == 403) {
    check.verdict = Credentials::kRefused;
  }
  co_return check;
}

}  // namespace charge_outbox::acquirer
