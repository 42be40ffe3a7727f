#include "router.hpp"

#include <boost/url/parse.hpp>

#include <algorithm>
#include <cctype>

#include "charge_outbox/trace/trace_context.hpp"

namespace charge_outbox::charge_api {
namespace {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
using http::Status;

http::Response MethodNotAllowed(const char* allow) {
  auto r = ToResponse(ApiError{ApiErrc::kMethodNotAllowed, std::string("Allowed: ") + allow});
  r.set(bhttp::field::allow, allow);
  return r;
}

// The request counter's method label. A label value taken from the request must come from a closed set:
// any other method would create a series that lives as long as the process.
std::string_view MethodLabel(bhttp::verb method) {
  for (const auto known : {bhttp::verb::get, bhttp::verb::head, bhttp::verb::post, bhttp::verb::put,
                           bhttp::verb::delete_, bhttp::verb::patch, bhttp::verb::options}) {
    if (method == known) {
      const auto name = bhttp::to_string(method);
      return {name.data(), name.size()};
    }
  }
  return "other";
}

}  // namespace

struct Router::Routed {
  const char* route;  // a metric label: the route's pattern, never the raw path
  http::Response response;
};

bool IsJsonMediaType(std::string_view content_type) {
  auto media = content_type.substr(0, content_type.find(';'));
  while (!media.empty() && media.back() == ' ') media.remove_suffix(1);
  while (!media.empty() && media.front() == ' ') media.remove_prefix(1);
  constexpr std::string_view kJson = "application/json";
  return media.size() == kJson.size() && std::equal(media.begin(), media.end(), kJson.begin(), [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) == b;
         });
}

Router::Router(ChargeService& service, ApiKeyCache& keys, db::Database& database, int schema_version,
               metrics::Registry& registry, ChargeApiProbe& probe)
    : service_(service),
      keys_(keys),
      database_(database),
      schema_version_(schema_version),
      registry_(registry),
      probe_(probe) {}

asio::awaitable<http::Reply> Router::Handle(http::Request request) {
  const auto started = std::chrono::steady_clock::now();
  auto routed = co_await Route(request);
  probe_.OnRequest(routed.route, MethodLabel(request.method()), static_cast<int>(routed.response.result_int()),
                   std::chrono::steady_clock::now() - started);
  co_return http::Reply{std::move(routed.response)};
}

asio::awaitable<http::Response> Router::Readiness() {
  const auto version = co_await database_.SchemaVersion();
  if (!version) {
    co_return http::ProblemJson(Status::service_unavailable, "Not ready", "database unreachable");
  }
  if (*version < schema_version_) {
    co_return http::ProblemJson(Status::service_unavailable, "Not ready",
                                "schema at version " + std::to_string(*version) + ", this build needs " +
                                    std::to_string(schema_version_));
  }
  co_return http::JsonResponse(Status::ok, std::string(R"({"status":"ready"})"));
}

asio::awaitable<Router::Routed> Router::Route(const http::Request& request) {
  // A NUL-terminated copy: Boost.URL 1.81 reads query strings with strlen, past the end of a bare view
  // into the request buffer.
  const std::string target_text(request.target().data(), request.target().size());
  const auto target = boost::urls::parse_origin_form(target_text);
  if (!target) co_return Routed{"other", ToResponse(ApiError{ApiErrc::kNotFound, "Malformed request target."})};
  const auto path = target->path();
  const auto method = request.method();

  // Probes and scrapes are GET, like every route: any other method is a 405 naming what is allowed.
  for (const char* operational : {"/healthz", "/readyz", "/metrics"}) {
    if (path == operational && method != bhttp::verb::get) co_return Routed{operational, MethodNotAllowed("GET")};
  }
  if (path == "/healthz") {
    co_return Routed{"/healthz", http::JsonResponse(Status::ok, std::string(R"({"status":"ok"})"))};
  }
  // GCC 12 miscompiles co_await inside a braced initializer (it frees a temporary twice), so every
  // awaited response is named before it is wrapped.
  if (path == "/readyz") {
    auto ready = co_await Readiness();
    co_return Routed{"/readyz", std::move(ready)};
  }
  if (path == "/metrics") {
    http::Response r{Status::ok, 11};
    r.set(bhttp::field::content_type, metrics::kTextContentType);
    r.body() = metrics::RenderText(registry_);
    r.prepare_payload();
    co_return Routed{"/metrics", std::move(r)};
  }

  const bool collection = path == "/v1/charges";
  const bool item = path.starts_with("/v1/charges/") && path.size() > 12 && path.find('/', 12) == std::string::npos;
  if (!collection && !item) co_return Routed{"other", ToResponse(ApiError{ApiErrc::kNotFound, "No such route."})};
  const char* route = collection ? "/v1/charges" : "/v1/charges/{id}";

  if (collection && method != bhttp::verb::post && method != bhttp::verb::get) {
    co_return Routed{route, MethodNotAllowed("GET, POST")};
  }
  if (item && method != bhttp::verb::get) co_return Routed{route, MethodNotAllowed("GET")};

  // Every /v1 route belongs to a merchant.
  const auto bearer = BearerKey(std::string_view(request[bhttp::field::authorization].data(),
                                                 request[bhttp::field::authorization].size()));
  if (!bearer) co_return Routed{route, ToResponse(ApiError{ApiErrc::kUnauthorized})};
  const auto merchant = co_await keys_.Authenticate(*bearer);
  if (!merchant) {
    co_return Routed{route, ToResponse(ApiError{ApiErrc::kDatabaseUnavailable, "", "", std::chrono::seconds{1}})};
  }
  if (!*merchant) co_return Routed{route, ToResponse(ApiError{ApiErrc::kUnauthorized})};
  const auto& merchant_id = (*merchant)->id;

  if (item) {
    const std::string public_id(path.substr(12));
    auto found = co_await service_.Get(merchant_id, public_id);
    co_return Routed{route, std::move(found)};
  }
  if (method == bhttp::verb::get) {
    const auto params = target->params();
    const auto key = params.find("idempotency_key");
    if (key == params.end() || !(*key).has_value) {
      co_return Routed{"/v1/charges?idempotency_key",
                       ToResponse(ApiError{ApiErrc::kInvalidField, "is required", "idempotency_key"})};
    }
    const std::string idempotency_key = (*key).value;
    // Checked as the header is: an invalid byte must be a 400 here, not a database error (503).
    if (!IsValidIdempotencyKey(idempotency_key)) {
      co_return Routed{"/v1/charges?idempotency_key",
                       ToResponse(ApiError{ApiErrc::kInvalidField, "must be 1 to 255 visible ASCII characters",
                                           "idempotency_key"})};
    }
    auto found = co_await service_.GetByKey(merchant_id, idempotency_key);
    co_return Routed{"/v1/charges?idempotency_key", std::move(found)};
  }

  // POST /v1/charges
  if (!IsJsonMediaType(std::string_view(request[bhttp::field::content_type].data(),
                                        request[bhttp::field::content_type].size()))) {
    co_return Routed{route, ToResponse(ApiError{ApiErrc::kUnsupportedMediaType})};
  }
  const auto key_header = request.find("Idempotency-Key");
  if (key_header == request.end()) co_return Routed{route, ToResponse(ApiError{ApiErrc::kMissingIdempotencyKey})};
  const std::string key(key_header->value().data(), key_header->value().size());
  if (!IsValidIdempotencyKey(key)) co_return Routed{route, ToResponse(ApiError{ApiErrc::kMalformedIdempotencyKey})};

  auto parsed = ParseChargeRequest(request.body());
  if (const auto* error = std::get_if<FieldError>(&parsed)) {
    co_return Routed{route, ToResponse(ApiError{ApiErrc::kInvalidField, error->problem, error->field})};
  }
  const auto incoming = request.find("traceparent");
  auto parent = incoming == request.end()
                    ? std::nullopt
                    : trace::ParseTraceparent(std::string_view(incoming->value().data(), incoming->value().size()));
  CreateCharge command{merchant_id, key, std::get<ChargeRequest>(std::move(parsed)),
                       parent ? trace::ChildOf(*parent) : trace::NewTrace()};
  auto created = co_await service_.Create(std::move(command));
  co_return Routed{route, std::move(created)};
}

}  // namespace charge_outbox::charge_api
