// The query API: GET /v1/merchants/{merchant_id}/captured-totals?from=YYYY-MM-DD&to=YYYY-MM-DD, a
// merchant's captured count and amount per UTC day and currency, days `from` to `to` inclusive (both
// optional: `to` defaults to today, `from` to `to`; at most 366 days). Bad input is a 4xx problem+json.
#pragma once

#include <boost/asio/awaitable.hpp>

#include <optional>
#include <string>
#include <string_view>

#include "charge_outbox/db/database.hpp"
#include "charge_outbox/http/server.hpp"

namespace charge_outbox::settlement {

struct TotalsQuery {
  std::string merchant_id;
  std::string from;  // "YYYY-MM-DD"
  std::string to;
};

// The query in a request target, or the problem to answer; `today` ("YYYY-MM-DD", UTC) fills defaults.
struct ParsedQuery {
  std::optional<TotalsQuery> query;
  std::optional<http::Response> problem;
};
ParsedQuery ParseTotalsQuery(std::string_view target, std::string_view today);

boost::asio::awaitable<http::Response> AnswerTotalsQuery(db::Database& database, const http::Request& request);

}  // namespace charge_outbox::settlement
