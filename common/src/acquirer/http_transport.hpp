// Private to the acquirer adapters: the HTTP/1.1 transport both share. A bounded pool of keep-alive
// connections to one origin, a deadline per call, plain or TLS, all on one strand; each call resumes on
// the caller's executor. An adapter builds a RequestSpec, and reads the TransportResult with its own
// classifier (Call).
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/beast/http/verb.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "charge_outbox/acquirer/classifier.hpp"
#include "charge_outbox/acquirer/http_acquirer_client.hpp"

namespace charge_outbox::acquirer::detail {

using Params = std::vector<std::pair<std::string, std::string>>;

// One HTTP request as an adapter builds it, before Beast sees it.
struct RequestSpec {
  boost::beast::http::verb method = boost::beast::http::verb::get;
  std::string target;        // path and query, from HttpTransport::Target
  std::string body;          // POST only
  std::string content_type;  // POST only
  std::optional<std::string> idempotency_key;
  std::string request_id;
  Params headers;  // the adapter's own fields (Stripe-Version)
};

using Classifier = std::function<AttemptOutcome(const TransportResult&, std::chrono::system_clock::time_point)>;

class HttpTransport {
 public:
  // Throws config::ConfigError for an unusable base URL, pool size or CA file.
  HttpTransport(boost::asio::any_io_executor executor, AcquirerClientConfig config);
  ~HttpTransport();
  HttpTransport(const HttpTransport&) = delete;
  HttpTransport& operator=(const HttpTransport&) = delete;

  // base path + `path` + the query, every name and value percent-encoded (brackets included, which Stripe
  // decodes as its own syntax).
  std::string Target(std::string_view path, const Params& params) const;

  // One request, read by `classify`, logged at debug. The transport stays alive until it completes.
  static boost::asio::awaitable<AttemptOutcome> Call(std::shared_ptr<HttpTransport> self, RequestSpec spec,
                                                     Classifier classify);
  static boost::asio::awaitable<TransportResult> Send(std::shared_ptr<HttpTransport> self, RequestSpec spec);
  static boost::asio::awaitable<HttpAcquirerClient::PoolStats> Stats(std::shared_ptr<HttpTransport> self);

  const AcquirerClientConfig& config() const;

 private:
  class State;
  std::shared_ptr<State> state_;
};

// Percent-encodes everything but RFC 3986's unreserved characters.
std::string Encode(std::string_view value);
// Form encoding of `params` (application/x-www-form-urlencoded, names and values percent-encoded).
std::string FormBody(const Params& params);
// RFC 3339 with microseconds, UTC.
std::string Rfc3339Micros(std::chrono::system_clock::time_point tp);

}  // namespace charge_outbox::acquirer::detail
