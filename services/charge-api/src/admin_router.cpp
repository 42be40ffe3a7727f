#include "admin_router.hpp"

#include "api_responses.hpp"
#include "routing.hpp"

namespace charge_outbox::charge_api {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
using http::Status;

struct AdminRouter::Routed {
  const char* route;  // a metric label: one of kAdminRoutes or "other", never the raw path
  http::Response response;
};

AdminRouter::AdminRouter(Readiness& readiness, metrics::Registry& registry, ChargeApiProbe& probe)
    : readiness_(readiness), registry_(registry), probe_(probe) {}

asio::awaitable<http::Reply> AdminRouter::Handle(http::Request request) {
  const auto started = std::chrono::steady_clock::now();
  auto routed = co_await Route(request);
  probe_.OnRequest(routed.route, MethodLabel(request.method()), static_cast<int>(routed.response.result_int()),
                   std::chrono::steady_clock::now() - started);
  co_return http::Reply{std::move(routed.response)};
}

asio::awaitable<AdminRouter::Routed> AdminRouter::Route(const http::Request& request) {
  const auto target = request.target();
  const auto path = std::string_view(target.data(), target.size()).substr(0, target.find('?'));
  const char* route = nullptr;
  for (const auto& r : kAdminRoutes) {
    if (path == r.path) route = r.path;
  }
  if (route == nullptr) co_return Routed{"other", ToResponse(ApiError{ApiErrc::kNotFound, "No such route."})};
  // Probes and scrapes are GET: any other method is a 405 naming what is allowed.
  if (request.method() != bhttp::verb::get) co_return Routed{route, MethodNotAllowed("GET")};

  if (path == "/healthz") co_return Routed{route, http::JsonResponse(Status::ok, std::string(R"({"status":"ok"})"))};
  if (path == "/readyz") {
    // GCC 12 miscompiles co_await inside a braced initializer: the awaited response is named first.
    auto ready = co_await readiness_.Check();
    co_return Routed{route, std::move(ready)};
  }
  http::Response r{Status::ok, 11};
  r.set(bhttp::field::content_type, metrics::kTextContentType);
  r.body() = metrics::RenderText(registry_);
  r.prepare_payload();
  co_return Routed{route, std::move(r)};
}

}  // namespace charge_outbox::charge_api
