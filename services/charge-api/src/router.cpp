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

}  // namespace

struct Router::Routed {
  const char* route;  // a metric label: the route's pattern, never the raw path
  http::Response response;
  bool anonymous_refusal = false;  // refused before a merchant was known: paced per client
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

Router::Router(ChargeService& service, ApiKeyCache& keys, KeyedLimiter& failed_auth, KeyedLimiter& merchant_rate,
               ChargeApiProbe& probe)
    : service_(service), keys_(keys), failed_auth_(failed_auth), merchant_rate_(merchant_rate), probe_(probe) {}

asio::awaitable<http::Reply> Router::Handle(http::Request request, asio::ip::address peer) {
  const auto started = std::chrono::steady_clock::now();
  auto routed = co_await Route(request, peer);
  probe_.OnRequest(routed.route, MethodLabel(request.method()), static_cast<int>(routed.response.result_int()),
                   std::chrono::steady_clock::now() - started);
  co_return http::Reply{.response = std::move(routed.response), .anonymous_refusal = routed.anonymous_refusal};
}

// A valid key memory knows costs nothing. Any other key takes a token from its client's failed-
// authentication budget before it is looked up, and gets it back if it turns out valid (or the database
// fails): a client past its budget is refused with 429 for the cost of a hash and two map lookups, and
// however many connections it opens, its lookups never outrun the budget. A key whose valid answer has
// just expired, or one already being looked up, takes none: a merchant's own requests arriving while its
// key is asked again must never be refused as guesses.
asio::awaitable<std::variant<charges::Merchant, ApiError>> Router::Authenticate(const std::string& api_key,
                                                                              const std::string& client) {
  auto answer = keys_.Recall(api_key);
  if (answer && *answer) co_return **answer;
  const bool budgeted = answer.has_value() || !keys_.LookupIsFree(api_key);
  if (budgeted) {
    if (const auto wait = failed_auth_.TryTake(client)) {
      probe_.OnRefused("failed_auth_limit");
      co_return ApiError{ApiErrc::kTooManyFailedAuthentications, "", "", *wait};
    }
  }
  const auto refund = [&] {
    if (budgeted) failed_auth_.Refund(client);
  };
  if (!answer) {
    auto found = co_await keys_.Lookup(api_key);
    if (!found) {
      refund();
      co_return ApiError{ApiErrc::kDatabaseUnavailable, "", "", std::chrono::seconds{1}};
    }
    answer = *found;
  }
  if (*answer) {
    refund();
    co_return **answer;
  }
  co_return ApiError{ApiErrc::kApiKeyUnknown};
}

asio::awaitable<Router::Routed> Router::Route(const http::Request& request, const asio::ip::address& peer) {
  // A NUL-terminated copy: Boost.URL 1.81 reads query strings with strlen, past the end of a bare view
  // into the request buffer.
  const std::string target_text(request.target().data(), request.target().size());
  const auto target = boost::urls::parse_origin_form(target_text);
  if (!target) {
    co_return Routed{"other", ToResponse(ApiError{ApiErrc::kNotFound, "Malformed request target."}), true};
  }
  const auto path = target->path();
  const auto method = request.method();

  const bool collection = path == "/v1/charges";
  const bool item = path.starts_with("/v1/charges/") && path.size() > 12 && path.find('/', 12) == std::string::npos;
  if (!collection && !item) {
    co_return Routed{"other", ToResponse(ApiError{ApiErrc::kNotFound, "No such route."}), true};
  }
  const char* route = collection ? "/v1/charges" : "/v1/charges/{id}";

  if (collection && method != bhttp::verb::post && method != bhttp::verb::get) {
    co_return Routed{route, MethodNotAllowed("GET, POST"), true};
  }
  if (item && method != bhttp::verb::get) co_return Routed{route, MethodNotAllowed("GET"), true};

  // Every /v1 route belongs to a merchant. A header without a well-formed bearer key is refused by its form
  // alone, before any lookup, so what it says tells nothing about which keys exist.
  std::optional<std::string_view> authorization;
  if (const auto header = request.find(bhttp::field::authorization); header != request.end()) {
    authorization = std::string_view(header->value().data(), header->value().size());
  }
  auto credentials = ReadBearer(authorization);
  switch (credentials.form) {
    case BearerCredentials::Form::kMissing:
      co_return Routed{route, ToResponse(ApiError{ApiErrc::kApiKeyMissing}), true};
    case BearerCredentials::Form::kOtherScheme:
      co_return Routed{route, ToResponse(ApiError{ApiErrc::kAuthSchemeNotBearer}), true};
    case BearerCredentials::Form::kMalformedKey:
      co_return Routed{route, ToResponse(ApiError{ApiErrc::kApiKeyMalformed}), true};
    case BearerCredentials::Form::kKey: break;
  }
  const auto bearer = std::move(credentials.key);
  auto authenticated = co_await Authenticate(bearer, http::ClientKey(peer));
  if (auto* refused = std::get_if<ApiError>(&authenticated)) {
    // A database failure is ours, not the client's doing: it is answered at once.
    if (refused->code == ApiErrc::kDatabaseUnavailable) co_return Routed{route, ToResponse(*refused)};
    co_return Routed{route, ToResponse(*refused), true};
  }
  const auto merchant_id = std::get<charges::Merchant>(std::move(authenticated)).id;
  if (const auto wait = merchant_rate_.TryTake(merchant_id)) {
    probe_.OnRefused("merchant_rate_limit");
    co_return Routed{route, ToResponse(ApiError{ApiErrc::kRateLimited, "", "", *wait})};
  }

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
    co_return Routed{route, ToResponse(ApiError{.code = ApiErrc::kUnsupportedMediaType, .key_unused = true})};
  }
  const auto key_header = request.find("Idempotency-Key");
  if (key_header == request.end()) co_return Routed{route, ToResponse(ApiError{ApiErrc::kMissingIdempotencyKey})};
  const std::string key(key_header->value().data(), key_header->value().size());
  if (!IsValidIdempotencyKey(key)) co_return Routed{route, ToResponse(ApiError{ApiErrc::kMalformedIdempotencyKey})};

  // Every refusal above and here comes before ChargeService::Create, the first thing that stores anything
  // under the key: the answer can say the key is unused by this request.
  auto parsed = ParseChargeRequest(request.body());
  if (const auto* error = std::get_if<FieldError>(&parsed)) {
    co_return Routed{route, ToResponse(ApiError{.code = ApiErrc::kInvalidField,
                                                .detail = error->problem,
                                                .field = error->field,
                                                .key_unused = true})};
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
