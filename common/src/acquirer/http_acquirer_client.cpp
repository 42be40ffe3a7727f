#include "charge_outbox/acquirer/http_acquirer_client.hpp"

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include "charge_outbox/acquirer/classifier.hpp"
#include "http_transport.hpp"

namespace charge_outbox::acquirer {

namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
namespace json = boost::json;
using detail::Classifier;
using detail::Encode;
using detail::RequestSpec;

// A classifier that reads the answer against the request that was sent (a capture, a lookup).
template <class Sent>
Classifier Against(AttemptOutcome (*classify)(const TransportResult&, const Sent&, std::chrono::system_clock::time_point),
                   Sent sent) {
  return [classify, sent = std::move(sent)](const TransportResult& result, std::chrono::system_clock::time_point now) {
    return classify(result, sent, now);
  };
}

}  // namespace

// Our protocol over the shared transport; the transport's state outlives any call in flight.
class HttpAcquirerClient::Impl {
 public:
  Impl(asio::any_io_executor executor, AcquirerClientConfig config)
      : transport(std::make_shared<detail::HttpTransport>(std::move(executor), std::move(config))) {}
  std::shared_ptr<detail::HttpTransport> transport;
};

HttpAcquirerClient::HttpAcquirerClient(asio::any_io_executor executor, AcquirerClientConfig config)
    : impl_(std::make_shared<Impl>(std::move(executor), std::move(config))) {}

HttpAcquirerClient::~HttpAcquirerClient() = default;

// The public methods are not coroutines: they build the request at once and hand a coroutine that owns
// the transport, so an awaitable outlives the HttpAcquirerClient object safely.
asio::awaitable<AttemptOutcome> HttpAcquirerClient::Capture(CaptureRequest request, std::string request_id) {
  const auto& transport = impl_->transport;
  RequestSpec spec{http::verb::post, transport->Target("/v1/captures", {}),
                   json::serialize(json::value{{"amount", request.amount},
                                               {"currency", request.currency},
                                               {"reference", request.reference},
                                               {"payment_method", request.payment_method}}),
                   "application/json", request.idempotency_key, std::move(request_id), {}};
  return detail::HttpTransport::Call(transport, std::move(spec), Against(&ClassifyCapture, std::move(request)));
}

asio::awaitable<AttemptOutcome> HttpAcquirerClient::LookupByKey(LookupRequest request, std::string request_id) {
  const auto& transport = impl_->transport;
  RequestSpec spec{http::verb::get, transport->Target("/v1/captures", {{"idempotency_key", request.idempotency_key}}),
                   {}, {}, std::nullopt, std::move(request_id), {}};
  return detail::HttpTransport::Call(transport, std::move(spec), Against(&ClassifyLookup, std::move(request)));
}

asio::awaitable<AttemptOutcome> HttpAcquirerClient::Void(VoidRequest request, std::string request_id) {
  const auto& transport = impl_->transport;
  RequestSpec spec{http::verb::post, transport->Target("/v1/captures/" + Encode(request.capture_id) + "/void", {}),
                   "{}", "application/json", std::move(request.idempotency_key), std::move(request_id), {}};
  return detail::HttpTransport::Call(transport, std::move(spec), &ClassifyVoid);
}

asio::awaitable<AttemptOutcome> HttpAcquirerClient::ListPage(ListWindow window, std::optional<std::string> page_token,
                                                             std::string request_id) {
  const auto& transport = impl_->transport;
  detail::Params params = {
      {"created_from", detail::Rfc3339Micros(window.created_from)},
      {"created_to", detail::Rfc3339Micros(window.created_to)},
      {"limit", std::to_string(window.limit)},
  };
  if (page_token.has_value()) params.emplace_back("page_token", std::move(*page_token));
  RequestSpec spec{http::verb::get, transport->Target("/v1/captures", params), {}, {}, std::nullopt,
                   std::move(request_id), {}};
  return detail::HttpTransport::Call(transport, std::move(spec), &ClassifyListPage);
}

asio::awaitable<HttpAcquirerClient::PoolStats> HttpAcquirerClient::Stats() {
  return detail::HttpTransport::Stats(impl_->transport);
}

}  // namespace charge_outbox::acquirer
