// AcquirerClient: the interface charge-api and the reconciler use to talk to the card acquirer
// (services/acquirer-sim/README.md, "Endpoints"), with one method per request, and helpers that run
// those requests under a RetryPolicy. HttpAcquirerClient is the real implementation; tests use a fake.
//
// Each method is one attempt: it never retries on its own and never throws for an I/O problem; every
// failure is an AttemptOutcome. The caller passes the request id of the attempt.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "charge_outbox/acquirer/model.hpp"
#include "charge_outbox/acquirer/retry_policy.hpp"

namespace charge_outbox::acquirer {

// Implementations say in their class comment whether they are thread-safe; HttpAcquirerClient is.
class AcquirerClient {
 public:
  virtual ~AcquirerClient() = default;

  // POST /v1/captures with Idempotency-Key = request.idempotency_key.
  virtual boost::asio::awaitable<AttemptOutcome> Capture(CaptureRequest request, std::string request_id) = 0;
  // GET /v1/captures?idempotency_key=K: kCaptured or kNotFound when the acquirer answers.
  virtual boost::asio::awaitable<AttemptOutcome> LookupByKey(LookupRequest request, std::string request_id) = 0;
  // POST /v1/captures/{id}/void with Idempotency-Key = request.idempotency_key.
  virtual boost::asio::awaitable<AttemptOutcome> Void(VoidRequest request, std::string request_id) = 0;
  // One page of GET /v1/captures?created_from&created_to&limit[&page_token]. ListByWindow follows pages.
  virtual boost::asio::awaitable<AttemptOutcome> ListPage(ListWindow window, std::optional<std::string> page_token,
                                                          std::string request_id) = 0;
};

// Each helper runs one operation under `policy`, with the same idempotency key on every attempt.
boost::asio::awaitable<RetryRun> CaptureWithRetries(AcquirerClient& client, CaptureRequest request,
                                                    const RetryPolicy& policy, util::Clock& clock,
                                                    AttemptObserver* observer = nullptr);
boost::asio::awaitable<RetryRun> LookupWithRetries(AcquirerClient& client, LookupRequest request,
                                                   const RetryPolicy& policy, util::Clock& clock,
                                                   AttemptObserver* observer = nullptr);
boost::asio::awaitable<RetryRun> VoidWithRetries(AcquirerClient& client, VoidRequest request,
                                                 const RetryPolicy& policy, util::Clock& clock,
                                                 AttemptObserver* observer = nullptr);

enum class ListEnd {
  kComplete,       // the last page had no next_page_token
  kPageFailed,     // a page could not be read within the policy; see failed_page
  kTokenRepeated,  // the acquirer handed back a page token it had already given: we stop rather than loop
  kStopped,        // the caller's page visitor asked to stop (VisitWindowPages)
};

struct ListResult {
  ListEnd end = ListEnd::kComplete;
  std::vector<Capture> captures;  // every capture of the pages read, in the acquirer's order
  int pages = 0;                  // pages read
  std::optional<RetryRun> failed_page;  // kPageFailed: the attempts of the page that could not be read
};

// Lists every capture created in the window, following next_page_token to the end; each page is read
// under `policy` (a fresh budget per page). A partial listing is never reported as complete.
boost::asio::awaitable<ListResult> ListByWindow(AcquirerClient& client, ListWindow window, const RetryPolicy& policy,
                                                util::Clock& clock);

// The same walk, page by page: each page's captures are handed to `visit` as the page is read, and only
// what the visitor keeps stays in memory (ListResult::captures is left empty). `visit` returns false to
// stop the walk there (ListEnd::kStopped, the page counted as read).
using PageVisitor = std::function<boost::asio::awaitable<bool>(std::vector<Capture> page)>;
boost::asio::awaitable<ListResult> VisitWindowPages(AcquirerClient& client, ListWindow window,
                                                    const RetryPolicy& policy, util::Clock& clock, PageVisitor visit);

// Whether the acquirer takes our credentials: one lookup of a key nobody uses (a 404 or any capture is
// yes). kRefused only on a 401 or 403; an acquirer that does not answer proves nothing about them.
enum class Credentials { kAccepted, kRefused, kUnknown };
struct CredentialCheck {
  Credentials verdict = Credentials::kUnknown;
  AttemptOutcome outcome;  // its status and detail, for the log line
};
boost::asio::awaitable<CredentialCheck> CheckCredentials(AcquirerClient& client);

}  // namespace charge_outbox::acquirer
