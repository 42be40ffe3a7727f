// A charge's whole story in one view, in time order: the request, every acquirer call with its evidence,
// every event (a state change, who wrote it, whether consumers have it), every person's action. Pure:
// built from what ReviewStore read, rendered for a person (a table) or a program (JSON).
#pragma once

#include <boost/json/object.hpp>

#include <string>
#include <vector>

#include "charge_outbox/charges/charge.hpp"
#include "charge_outbox/charges/review_store.hpp"

namespace charge_outbox::charge_admin {

struct TimelineEntry {
  std::string at;     // RFC 3339, the database's clock
  std::string actor;  // charge-api, reconciler, charge-admin, a person's name
  std::string what;   // one line
};

std::vector<TimelineEntry> Timeline(const charges::Charge& charge, const charges::ChargeHistory& history);

// The charge as a person may see it: never its payment method token.
boost::json::object ChargeJson(const charges::Charge& charge);

// One line per charge for `review list` and `charge find`.
std::string ChargeRow(const charges::Charge& charge);
std::string ChargeRowHeader();

std::string FormatDuration(std::chrono::milliseconds d);  // "3d 4h", "2h 5m", "40s"

}  // namespace charge_outbox::charge_admin
