#include "totals_query.hpp"

#include <boost/beast/http/field.hpp>
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/url/parse.hpp>

#include <chrono>

#include "charge_outbox/db/text_query.hpp"
#include "charge_outbox/util/time.hpp"

namespace charge_outbox::settlement {
namespace {

namespace bhttp = boost::beast::http;
using Status = http::Status;

constexpr std::string_view kPrefix = "/v1/merchants/";
constexpr std::string_view kSuffix = "/captured-totals";
constexpr int kMaxDays = 366;
constexpr std::string_view kTotalsSql =
    "SELECT day::text, currency, captured_count, captured_amount FROM captured_totals"
    " WHERE merchant_id = $1 AND day BETWEEN $2::date AND $3::date AND captured_count <> 0"
    " ORDER BY day, currency";

http::Response BadRequest(std::string_view field, std::string_view detail) {
  return http::ProblemJson(Status::bad_request, "Bad Request", detail, {{"field", field}});
}

std::optional<std::chrono::sys_days> ParseDay(std::string_view text) {
  if (text.size() != 10) return std::nullopt;
  const auto t = util::ParseRfc3339(std::string(text) + "T00:00:00Z");
  if (!t) return std::nullopt;
  return std::chrono::floor<std::chrono::days>(*t);
}

std::string FormatDay(std::chrono::sys_days day) {
  return util::FormatRfc3339(std::chrono::system_clock::time_point(day)).substr(0, 10);
}

http::Response MethodNotAllowed() {
  auto r = http::ProblemJson(Status::method_not_allowed, "Method Not Allowed", "Allowed: GET");
  r.set(bhttp::field::allow, "GET");
  return r;
}

http::Response Unavailable() {
  return http::ProblemJson(Status::service_unavailable, "Service Unavailable",
                           "the projection's database did not answer; try again");
}

}  // namespace

ParsedQuery ParseTotalsQuery(std::string_view target, std::string_view today) {
  const auto url = boost::urls::parse_origin_form(target);
  if (!url) return {.query = std::nullopt, .problem = BadRequest("path", "the request target is not a valid URL path")};
  const std::string path = url->path();
  if (path.size() <= kPrefix.size() + kSuffix.size() || path.rfind(kPrefix, 0) != 0 ||
      path.compare(path.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0) {
    return {.query = std::nullopt, .problem = http::ProblemJson(Status::not_found, "Not Found", "no such path")};
  }
  TotalsQuery q;
  q.merchant_id = path.substr(kPrefix.size(), path.size() - kPrefix.size() - kSuffix.size());
  const bool printable = q.merchant_id.size() <= 128 && std::all_of(q.merchant_id.begin(), q.merchant_id.end(),
                                                                     [](char c) { return c > ' ' && c <= '~' && c != '/'; });
  if (!printable) return {.query = std::nullopt, .problem = BadRequest("merchant_id", "merchant_id must be 1 to 128 printable characters")};

  std::optional<std::string> from, to;
  for (const auto& param : url->params()) {
    if (param.key == "from") {
      from = param.value;
    } else if (param.key == "to") {
      to = param.value;
    } else {
      return {.query = std::nullopt, .problem = BadRequest(param.key, "unknown query parameter; allowed: from, to")};
    }
  }
  const auto to_day = ParseDay(to.value_or(std::string(today)));
  if (!to_day) return {.query = std::nullopt, .problem = BadRequest("to", "to must be a date, YYYY-MM-DD")};
  const auto from_day = from ? ParseDay(*from) : to_day;
  if (!from_day) return {.query = std::nullopt, .problem = BadRequest("from", "from must be a date, YYYY-MM-DD")};
  if (*from_day > *to_day) return {.query = std::nullopt, .problem = BadRequest("from", "from must not be after to")};
  if ((*to_day - *from_day).count() >= kMaxDays) {
    return {.query = std::nullopt, .problem = BadRequest("from", "at most 366 days per query")};
  }
  q.from = FormatDay(*from_day);
  q.to = FormatDay(*to_day);
  return {.query = std::move(q), .problem = std::nullopt};
}

boost::asio::awaitable<http::Response> AnswerTotalsQuery(db::Database& database, const http::Request& request) {
  if (request.method() != bhttp::verb::get) {
    co_return MethodNotAllowed();
  }
  const auto today = util::FormatRfc3339(std::chrono::system_clock::now()).substr(0, 10);
  auto parsed = ParseTotalsQuery(request.target(), today);
  if (parsed.problem) co_return std::move(*parsed.problem);
  const auto& q = *parsed.query;
  db::TextParams params{q.merchant_id, q.from, q.to};
  auto rows = co_await db::QueryText(database, std::string(kTotalsSql), std::move(params));
  if (!rows) co_return Unavailable();
  boost::json::array days;
  for (const auto& row : *rows) {
    days.push_back(boost::json::object{{"day", *row[0]},
                                       {"currency", *row[1]},
                                       {"captured_count", std::stoll(*row[2])},
                                       {"captured_amount", std::stoll(*row[3])}});
  }
  co_return http::JsonResponse(Status::ok, boost::json::object{{"merchant_id", q.merchant_id},
                                                               {"from", q.from},
                                                               {"to", q.to},
                                                               {"days", std::move(days)}});
}

}  // namespace charge_outbox::settlement
