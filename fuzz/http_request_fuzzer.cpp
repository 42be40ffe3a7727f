// charge-api's request path up to the database, on raw bytes from a connection: Beast's request parser
// with the limits the server sets (common/src/http/server.cpp; charge-api's defaults), then what
// Router::Route does before its first database call: the target parsed with Boost.URL (from a
// NUL-terminated copy, as the router does), the route picked from the decoded path, the bearer key, the
// idempotency key (query or header), the media type, the body (charge_request_checks.hpp) and the
// traceparent.
#include <boost/beast/http/string_body.hpp>
#include <boost/url/parse.hpp>

#include <algorithm>
#include <string>

#include "api_key_cache.hpp"
#include "charge_outbox/http/server.hpp"
#include "charge_outbox/trace/trace_context.hpp"
#include "charge_request_checks.hpp"
#include "fuzz_check.hpp"
#include "router.hpp"

namespace {

namespace bhttp = boost::beast::http;
using namespace charge_outbox;

std::string_view View(boost::beast::string_view v) { return {v.data(), v.size()}; }

bool VisibleAscii(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

void Route(const http::Request& request) {
  const std::string target_text(request.target().data(), request.target().size());
  const auto target = boost::urls::parse_origin_form(target_text);
  if (!target) return;
  const auto path = target->path();
  const bool collection = path == "/v1/charges";
  const bool item = path.starts_with("/v1/charges/") && path.size() > 12 && path.find('/', 12) == std::string::npos;
  if (!collection && !item) return;

  const auto authorization = View(request[bhttp::field::authorization]);
  if (const auto key = charge_api::BearerKey(authorization)) {
    // A key is 1 to 256 visible characters, taken from the header as sent.
    FUZZ_CHECK(!key->empty() && key->size() <= 256 && VisibleAscii(*key));
    FUZZ_CHECK(authorization.find(*key) != std::string_view::npos);
  }
  if (item) {
    const std::string public_id(path.substr(12));
    FUZZ_CHECK(!public_id.empty() && public_id.find('/') == std::string::npos);
    return;
  }
  if (request.method() == bhttp::verb::get) {
    const auto params = target->params();
    const auto key = params.find("idempotency_key");
    if (key != params.end() && (*key).has_value) {
      const std::string idempotency_key = (*key).value;
      if (charge_api::IsValidIdempotencyKey(idempotency_key)) {
        FUZZ_CHECK(idempotency_key.size() <= 255 && VisibleAscii(idempotency_key));
      }
    }
    return;
  }
  if (!charge_api::IsJsonMediaType(View(request[bhttp::field::content_type]))) return;
  const auto key_header = request.find("Idempotency-Key");
  if (key_header == request.end()) return;
  const std::string key(key_header->value().data(), key_header->value().size());
  if (!charge_api::IsValidIdempotencyKey(key)) return;
  FUZZ_CHECK(!key.empty() && key.size() <= 255 && VisibleAscii(key));
  fuzz::CheckChargeRequest(request.body());
  const auto incoming = request.find("traceparent");
  if (incoming != request.end()) {
    if (const auto parent = trace::ParseTraceparent(View(incoming->value()))) {
      // What is stored with the events and sent to Kafka must parse again as the same trace.
      const auto child = trace::ChildOf(*parent);
      const auto again = trace::ParseTraceparent(child.ToTraceparent());
      FUZZ_CHECK(again && again->trace_id == parent->trace_id && again->sampled == parent->sampled);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const http::ServerOptions limits;  // charge-api's http.body_limit defaults to the server's 16 KiB
  bhttp::request_parser<bhttp::string_body> parser;
  parser.header_limit(static_cast<std::uint32_t>(limits.header_limit));
  parser.body_limit(limits.body_limit);
  if (!fuzz::ParseWhole(parser, fuzz::Bytes(data, size))) return 0;
  Route(parser.get());
  return 0;
}
