#include "routing.hpp"

#include <string>

#include "api_responses.hpp"

namespace charge_outbox::charge_api {

namespace bhttp = boost::beast::http;

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

http::Response MethodNotAllowed(const char* allow) {
  auto r = ToResponse(ApiError{ApiErrc::kMethodNotAllowed, std::string("Allowed: ") + allow});
  r.set(bhttp::field::allow, allow);
  return r;
}

}  // namespace charge_outbox::charge_api
