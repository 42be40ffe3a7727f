#include "chaos_stripe_report.hpp"

#include <pqxx/pqxx>

#include <algorithm>

namespace charge_outbox::chaos {

std::map<std::string, std::int64_t> StripeExercise(ChaosStack& stack, const std::vector<Attempt>& attempts) {
  std::map<std::string, std::int64_t> rows;
  for (const auto& [kind, n] : stack.AcquirerRequestCounts()) {
    rows["a. acquirer-sim requests (since it last started): " + kind] = n;
  }
  {
    pqxx::connection conn(stack.database_url());
    pqxx::nontransaction tx(conn);
    for (const auto& row : tx.exec("SELECT operation, COALESCE(outcome, 'unfinished'), count(*) FROM acquirer_attempts"
                                   " GROUP BY 1, 2")) {
      rows["b. attempts recorded: " + row[0].as<std::string>() + " " + row[1].as<std::string>()] =
          row[2].as<std::int64_t>();
    }
  }
  const auto& settings = stack.stripe();
  rows["c. reconciler processes at once, most (budgeted: " + std::to_string(settings.reconcilers_budgeted) + ")"] =
      stack.max_concurrent_reconcilers();
  rows["d. POSTs of a key older than the key retention"] =
      std::count_if(attempts.begin(), attempts.end(),
                    [&](const Attempt& a) { return a.sent - a.key_first_sent > settings.key_retention; });
  return rows;
}

std::string DescribeStripeSettings(const StripeSettings& s) {
  return "key retention " + std::to_string(s.key_retention.count()) + "ms, search lag " +
         std::to_string(s.search_lag.count()) + "ms, searches/s: acquirer-sim " +
         std::to_string(s.sim_search_rate_limit) + " per merchant >= charge-api 2 x " +
         std::to_string(s.charge_api_search_rate) + " + reconciler " + std::to_string(s.reconcilers_budgeted) + " x " +
         std::to_string(s.reconciler_search_rate) + ", reconciler batch " + std::to_string(s.reconciler_batch_size);
}

}  // namespace charge_outbox::chaos
