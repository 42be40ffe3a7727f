#include "charge_outbox/app/admin_port.hpp"

#include <boost/beast/http/field.hpp>
#include <boost/json/value.hpp>

namespace charge_outbox::app {
namespace {

namespace bhttp = boost::beast::http;
using http::Status;

http::Response Probe(const ProbeAnswer& answer) {
  return http::JsonResponse(answer.ok ? Status::ok : Status::service_unavailable,
                            boost::json::value{{"status", answer.status}});
}

}  // namespace

boost::asio::awaitable<http::Reply> AnswerAdmin(http::Request request, metrics::Registry& registry,
                                                const AdminChecks& checks) {
  const std::string path(request.target());
  http::Reply reply;
  if ((path == "/metrics" || path == "/healthz" || path == "/readyz") && request.method() != bhttp::verb::get) {
    reply.response = http::ProblemJson(Status::method_not_allowed, "Method Not Allowed", "Allowed: GET");
    reply.response.set(bhttp::field::allow, "GET");
  } else if (path == "/metrics") {
    reply.response.result(Status::ok);
    reply.response.set(bhttp::field::content_type, metrics::kTextContentType);
    reply.response.body() = metrics::RenderText(registry);
  } else if (path == "/healthz") {
    reply.response = Probe(checks.live());
  } else if (path == "/readyz") {
    const auto ready = co_await checks.ready();
    reply.response = Probe(ready);
  } else {
    reply.response = http::ProblemJson(Status::not_found, "Not Found", "no such path");
  }
  co_return reply;
}

}  // namespace charge_outbox::app
