// Readiness: the answer of /readyz (database reachable, schema at the version this build needs), asked
// over a database connection of its own. Through the payments pool, a full pool made readiness lie (a
// busy instance reported unready and was taken out of the Service) and a flood of /readyz took
// connections from payments; here neither can happen. An answer is reused for `reuse_for`, so probes
// cost at most one query per interval whatever their number.
#pragma once

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <mutex>
#include <optional>
#include <string>

#include "charge_outbox/db/database.hpp"
#include "charge_outbox/http/server.hpp"
#include "token_bucket.hpp"

namespace charge_outbox::charge_api {

// Thread-safe.
class Readiness {
 public:
  Readiness(db::Database& database, int schema_version, std::chrono::milliseconds reuse_for, Clock clock = SteadyNow);

  boost::asio::awaitable<http::Response> Check();

 private:
  struct Answer {
    bool ready = false;
    std::string detail;
  };
  Answer Judge(const db::DbResult<int>& version) const;

  db::Database& database_;
  const int schema_version_;
  const std::chrono::milliseconds reuse_for_;
  const Clock clock_;
  std::mutex mutex_;
  std::optional<Answer> last_;
  TimePoint answered_{};
  bool asking_ = false;  // a query is out: others take the last answer instead of queueing behind it
};

}  // namespace charge_outbox::charge_api
