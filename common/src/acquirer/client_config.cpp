#include "charge_outbox/acquirer/http_acquirer_client.hpp"
#include "charge_outbox/config/config.hpp"
#include "charge_outbox/retry/backoff.hpp"
#include "origin.hpp"

#include <algorithm>
#include <string>

namespace charge_outbox::acquirer {

using std::chrono::milliseconds;

namespace {

// A connection that never leaves the machine: plain HTTP there exposes the key to no network.
bool IsLoopback(const detail::Origin& origin) {
  return origin.host == "localhost" || origin.host == "::1" || (origin.host_is_ip && origin.host.starts_with("127."));
}

}  // namespace

#if defined(CHARGE_OUTBOX_FAILPOINTS) && CHARGE_OUTBOX_FAILPOINTS
const AcquirerBuildRules AcquirerBuildRules::kThisBuild{.release = false};
#else
const AcquirerBuildRules AcquirerBuildRules::kThisBuild{.release = true};
#endif

AcquirerClientConfig LoadAcquirerClientConfig(config::ConfigReader& reader) {
  return LoadAcquirerClientConfig(reader, AcquirerBuildRules::kThisBuild);
}

std::string_view ToString(AcquirerKind kind) {
  switch (kind) {
    case AcquirerKind::kNative: return "native";
    case AcquirerKind::kStripe: return "stripe";
  }
  return "?";
}

std::optional<milliseconds> MaxDeadline(const AcquirerClientConfig& config) {
  switch (config.kind) {
    case AcquirerKind::kNative: return std::nullopt;
    case AcquirerKind::kStripe: {
      const auto retention = config.stripe.key_retention;
      return retention - retention / 24 - config.request_timeout;
    }
  }
  return std::nullopt;
}

void CheckDeadlineAgainstAcquirer(const AcquirerClientConfig& config, std::string_view deadline_key,
                                  milliseconds deadline) {
  const auto max = MaxDeadline(config);
  if (!max.has_value() || deadline <= *max) return;
  throw config::ConfigError(
      std::string(deadline_key),
      "is " + std::to_string(deadline.count()) + "ms, but with acquirer.kind " + std::string(ToString(config.kind)) +
          " a capture may be sent until the deadline and must reach the acquirer while it still remembers the "
          "charge's idempotency key (acquirer.stripe.key_retention " +
          std::to_string(config.stripe.key_retention.count()) +
          "ms, less a twenty-fourth for clocks, less acquirer.request_timeout): past it the same key makes a new "
          "payment. At most " + std::to_string(std::max<milliseconds::rep>(max->count(), 0)) + "ms");
}

AcquirerClientConfig LoadAcquirerClientConfig(config::ConfigReader& reader, const AcquirerBuildRules& rules) {
  AcquirerClientConfig c;
  const auto kind = reader.Choice("acquirer.kind", "native", {"native", "stripe"});
  c.kind = kind == "stripe" ? AcquirerKind::kStripe : AcquirerKind::kNative;
  c.stripe.key_retention = reader.Duration("acquirer.stripe.key_retention", std::chrono::hours{24}, milliseconds{1000},
                                           std::chrono::hours{24 * 30});
  c.stripe.search_lag = reader.Duration("acquirer.stripe.search_lag", std::chrono::minutes{1}, milliseconds{0},
                                        std::chrono::hours{2});
  c.stripe.search_rate_limit = reader.Number("acquirer.stripe.search_rate_limit", 20, 0.1, 1000);
  c.stripe.events_pages = static_cast<int>(reader.Integer("acquirer.stripe.events_pages", 5, 0, 100));
  c.base_url = reader.String("acquirer.url");
  const auto origin = detail::ParseOrigin(c.base_url);
  c.api_key = reader.Secret("acquirer.api_key");
  c.connect_timeout = reader.Duration("acquirer.connect_timeout", milliseconds{2000}, milliseconds{1},
                                      std::chrono::minutes{5});
  c.request_timeout = reader.Duration("acquirer.request_timeout", milliseconds{10000}, milliseconds{1},
                                      std::chrono::minutes{10});
  c.max_connections = static_cast<std::size_t>(reader.Integer("acquirer.pool.max_connections", 16, 1, 4096));
  c.max_queued = static_cast<std::size_t>(reader.Integer("acquirer.pool.max_queued", 64, 0, 100'000));
  c.idle_timeout = reader.Duration("acquirer.pool.idle_timeout", milliseconds{30000}, milliseconds{0},
                                   std::chrono::hours{1});
  c.max_response_bytes =
      static_cast<std::size_t>(reader.Integer("acquirer.max_response_bytes", 1024 * 1024, 1024, 64 * 1024 * 1024));
  c.tls_verify = reader.Boolean("acquirer.tls.verify", true);
  c.tls_ca_file = reader.String("acquirer.tls.ca_file", "");
  // Without verification anyone on the path could take the API key and card tokens; a test acquirer with
  // its own certificate is trusted through ca_file, so a release build has no use for turning it off.
  if (!c.tls_verify && rules.release) {
    throw config::ConfigError("acquirer.tls.verify",
                              "is false, but this is a release build, which always verifies the acquirer's "
                              "certificate (CHARGE_OUTBOX_FAILPOINTS=OFF, as in the container image); trust a "
                              "private CA with acquirer.tls.ca_file instead");
  }
  if (!origin.tls && !c.tls_ca_file.empty()) {
    throw config::ConfigError("acquirer.tls.ca_file", "is set but acquirer.url is http://; use https:// or drop it");
  }
  c.list_page_limit = static_cast<int>(reader.Integer("acquirer.list.page_limit", 100, 1, 1000));
  c.retry.max_attempts = static_cast<int>(reader.Integer("acquirer.retry.max_attempts", 4, 1, 100));
  reader.Renamed("acquirer.retry.base_delay", "acquirer.retry.backoff.base");
  reader.Renamed("acquirer.retry.max_delay", "acquirer.retry.backoff.max");
  reader.Renamed("acquirer.retry.total_budget", "acquirer.retry.backoff.budget");
  c.retry.backoff = retry::LoadBackoffOptions(reader, "acquirer.retry", RetryPolicyOptions{}.backoff, milliseconds{0},
                                              std::chrono::hours{24});
  // Checked last, so that a problem found above is the one named first. Every call carries the API key
  // and card tokens: over plain HTTP beyond this machine they would travel in clear.
  const bool allow_plain_http = reader.Boolean("acquirer.allow_plain_http", false);
  if (!origin.tls && !IsLoopback(origin) && rules.release) {
    throw config::ConfigError("acquirer.url",
                              "is plain http:// to another host, and this is a release build "
                              "(CHARGE_OUTBOX_FAILPOINTS=OFF, as in the container image), which never sends the API "
                              "key and card tokens in clear, acquirer.allow_plain_http or not; use https:// (a test "
                              "acquirer behind TLS, its CA in acquirer.tls.ca_file)");
  }
  if (!origin.tls && !allow_plain_http && !IsLoopback(origin)) {
    throw config::ConfigError("acquirer.url",
                              "is plain http:// to another host, so the API key and card tokens would travel in "
                              "clear; use https://, or set acquirer.allow_plain_http: true for a test acquirer");
  }
  return c;
}

}  // namespace charge_outbox::acquirer
