// What the settlement-projection e2e suite shares: a source database with the charge schema, a topic
// and the real outbox-relay (RelayE2E), a projection database of its own and a consumer group per test,
// the real settlement-projection binary, charges written as charge-api writes them, and the check that
// ends every test: the projection equals the source, exactly.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "http_test_client.hpp"
#include "pg_test_database.hpp"
#include "relay_fixture.hpp"
#include "service_process.hpp"

namespace charge_outbox::testing {

// One (merchant, UTC day, currency) of captured_totals: count and amount.
struct Totals {
  std::int64_t count = 0;
  std::int64_t amount = 0;
  auto operator<=>(const Totals&) const = default;
};
inline void PrintTo(const Totals& t, std::ostream* os) { *os << t.count << " / " << t.amount; }
using TotalsByKey = std::map<std::string, Totals>;  // "merchant|YYYY-MM-DD|CUR"
std::string TotalsKey(const std::string& merchant, const std::string& day, const std::string& currency);

// The bearer token every projection the fixture starts accepts (HTTP_TOKEN_HASHES holds its SHA-256), and
// the header that presents a token.
inline constexpr const char* kProjectionToken = "projection-e2e-token-1";
HttpHeaders BearerHeader(const std::string& token = kProjectionToken);

class ProjectionE2E {
 public:
  ProjectionE2E(const std::string& test_name, int partitions = 6);

  // settlement-projection as a user starts it (migrated first), ports 0, short intervals, accepting
  // kProjectionToken; `extra` wins.
  std::unique_ptr<ServiceProcess> StartProjection(const EnvChanges& extra = {}) const;
  // The same as a bare process, for one that dies before it reports its ports.
  ChildProcess StartProjectionProcess(const EnvChanges& extra = {}) const;
  EnvChanges ProjectionEnv(const EnvChanges& extra = {}) const;

  // `count` charges of these merchants, written as charge-api writes them (the charge row and its outbox
  // event in one transaction per change): initiated, then captured or declined, some captured ones
  // flagged needs_review later; updated_at spread over the last 60 hours, so several UTC days. Returns
  // the number of events written.
  int WriteCharges(const std::vector<std::string>& merchants, int count) const;
  std::vector<std::string> AddMerchants(int count) const;

  // Starts a relay (with `extra`) and waits until it has published every event; returns it, running.
  std::unique_ptr<ServiceProcess> DrainOutbox(std::chrono::milliseconds timeout, const EnvChanges& extra = {}) const;

  // The group has committed every partition's offset up to its end: nothing read is left to apply and
  // nothing more is coming. Asked of the broker, not of a gauge.
  bool OffsetsCommitted() const;

  // Every charge of the source has reached its last sequence in the projection's inbox.
  bool CaughtUp() const;
  bool WaitCaughtUp(std::chrono::milliseconds timeout) const;

  // The end of every test: captured_totals equals the source's captured charges per (merchant, UTC day
  // of updated_at, currency), and each charge's inbox last_sequence equals its events written.
  void ExpectProjectionMatchesSource() const;

  RelayE2E& source() const { return *source_; }
  const PgTestDatabase& source_db() const { return source_->db(); }
  const PgTestDatabase& projection_db() const { return *projection_; }
  const std::string& group() const { return group_; }

 private:
  std::unique_ptr<RelayE2E> source_;
  std::unique_ptr<PgTestDatabase> projection_;
  std::string group_;
  int partitions_;
};

// captured_totals, its non-zero rows.
TotalsByKey ProjectionTotals(const PgTestDatabase& projection);
// inbox_charges: charge id -> last applied sequence.
std::map<std::string, int> InboxProgress(const PgTestDatabase& projection);

// The API port from the projection's start-up line ("API on HOST:PORT, admin on HOST:PORT").
std::uint16_t ApiPort(const ServiceProcess& projection);

// A metric's value, 0 when absent (a counter not yet incremented is still rendered, but a scrape may fail).
double Metric(const ServiceProcess& service, const std::string& series);

}  // namespace charge_outbox::testing
