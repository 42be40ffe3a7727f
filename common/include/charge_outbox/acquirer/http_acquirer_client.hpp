// HttpAcquirerClient: the AcquirerClient over HTTP/1.1 (Boost.Beast), plain for acquirer-sim and TLS
// with certificate verification for real acquirers, with a bounded pool of keep-alive connections and
// a deadline per call. Its configuration, and LoadAcquirerClientConfig to read it from a daemon's config.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "charge_outbox/acquirer/acquirer_client.hpp"
#include "charge_outbox/acquirer/model.hpp"
#include "charge_outbox/acquirer/retry_policy.hpp"

namespace charge_outbox::config {
class ConfigReader;
}

namespace charge_outbox::acquirer {

// Which adapter speaks to the acquirer (docs/stripe.md).
enum class AcquirerKind {
  kNative,  // our protocol (services/acquirer-sim/README.md, "Endpoints"): HttpAcquirerClient
  kStripe,  // Stripe's API v1, PaymentIntents with automatic capture: StripeAcquirerClient
};
std::string_view ToString(AcquirerKind kind);

// What only the Stripe adapter reads (`acquirer.stripe.*`).
struct StripeOptions {
  // How long Stripe keeps an idempotency key (24 h): past it the same key makes a new PaymentIntent, so no
  // create may be sent then. Bounds the charge's deadline (MaxDeadline).
  std::chrono::milliseconds key_retention{std::chrono::hours{24}};
  // How far search may lag behind a PaymentIntent's creation (under a minute, up to an hour in incidents): a
  // search that finds nothing proves nothing before it. Bounds reconciler.visibility_window from below.
  std::chrono::milliseconds search_lag{std::chrono::minutes{1}};
  double search_rate_limit = 20;  // searches per second, Stripe's limit; the adapter paces itself under it
  int events_pages = 5;           // pages of events read after a search that found nothing (0: none)
  // Stripe-Version, so Stripe's answers keep the shape we parse whatever the account's default: the version
  // of the OpenAPI spec stripe-mock v0.203.0 carries, so the contract check validates what we send.
  std::string api_version = "2026-08-26.dahlia";
};

struct AcquirerClientConfig {
  AcquirerKind kind = AcquirerKind::kNative;
  StripeOptions stripe;
  std::string base_url;  // http://host:port or https://host[:port][/prefix]
  std::string api_key;   // sent as "Authorization: Bearer ..."; a secret, never logged
  std::chrono::milliseconds connect_timeout{2000};   // TCP connect plus TLS handshake
  std::chrono::milliseconds request_timeout{10000};  // the whole call: pool wait, connect, write, read
  std::size_t max_connections = 16;                  // open connections at most (busy plus idle)
  // charge-api: charges admitted to wait for a connection beyond those it has. A charge beyond them is
  // answered 503 before its intent is written, rather than written and then failed by our own queue.
  std::size_t max_queued = 64;
  std::chrono::milliseconds idle_timeout{30000};     // a keep-alive connection idle longer is closed
  std::size_t max_response_bytes = 1024 * 1024;      // a larger response is malformed (unknown)
  bool tls_verify = true;    // verify the acquirer's certificate and host name (https only)
  std::string tls_ca_file;   // PEM bundle to trust instead of the system's; empty: system default paths
  int list_page_limit = 100; // page size for ListByWindow callers that take it from config
  RetryPolicyOptions retry;
};

// Reads `acquirer.*`:
//   acquirer.url (required), acquirer.api_key (secret: env ACQUIRER_API_KEY only),
//   acquirer.connect_timeout (2s), acquirer.request_timeout (10s), acquirer.pool.max_connections (16),
//   acquirer.pool.max_queued (64), acquirer.pool.idle_timeout (30s), acquirer.max_response_bytes (1048576), acquirer.tls.verify (true),
//   acquirer.tls.ca_file (""), acquirer.list.page_limit (100), acquirer.retry.max_attempts (4),
//   acquirer.retry.backoff.base (1s), acquirer.retry.backoff.max (8s), acquirer.retry.backoff.budget (15s).
// Throws config::ConfigError naming the key. A release build (CHARGE_OUTBOX_FAILPOINTS=OFF, the container
// image) refuses acquirer.tls.verify: false, as it refuses FAILPOINTS: trust a private CA with
// acquirer.tls.ca_file instead. Plain http:// to another host is refused by a release build, and needs
// acquirer.allow_plain_http in a test build.
AcquirerClientConfig LoadAcquirerClientConfig(config::ConfigReader& reader);

// What the build allows; LoadAcquirerClientConfig(reader) uses this build's (kThisBuild), the overload
// below lets a test build check a release build's rules.
struct AcquirerBuildRules {
  bool release = false;  // a release build: no way to turn TLS verification off or to send in clear to another host
  static const AcquirerBuildRules kThisBuild;
};
AcquirerClientConfig LoadAcquirerClientConfig(config::ConfigReader& reader, const AcquirerBuildRules& rules);

// The longest charge deadline (`charge.deadline`, `reconciler.deadline`) this acquirer allows, or nullopt for
// no bound. Stripe: a capture may be sent until the deadline and lasts up to request_timeout, and must reach
// Stripe while its key is still remembered, with a twenty-fourth of the retention to spare for clocks
// (23 h of 24): past it the same key would be a new payment.
std::optional<std::chrono::milliseconds> MaxDeadline(const AcquirerClientConfig& config);

// Throws config::ConfigError naming `deadline_key` when `deadline` exceeds MaxDeadline(config).
void CheckDeadlineAgainstAcquirer(const AcquirerClientConfig& config, std::string_view deadline_key,
                                  std::chrono::milliseconds deadline);

// Thread-safe: calls may come from any thread or executor, concurrently; the client serialises its own
// bookkeeping and I/O on an internal strand of the executor given at construction, and each call
// resumes on the caller's executor. Calls in flight keep the client's internals alive, so destroying
// the client while a call is pending is safe (that call still completes). Never retries on its own: a
// retry is a new attempt the caller must be able to record.
class HttpAcquirerClient final : public AcquirerClient {
 public:
  // Throws config::ConfigError for an unusable base URL or CA file (start-up only).
  HttpAcquirerClient(boost::asio::any_io_executor executor, AcquirerClientConfig config);
  ~HttpAcquirerClient() override;
  HttpAcquirerClient(const HttpAcquirerClient&) = delete;
  HttpAcquirerClient& operator=(const HttpAcquirerClient&) = delete;

  boost::asio::awaitable<AttemptOutcome> Capture(CaptureRequest request, std::string request_id) override;
  boost::asio::awaitable<AttemptOutcome> LookupByKey(LookupRequest request, std::string request_id) override;
  boost::asio::awaitable<AttemptOutcome> Void(VoidRequest request, std::string request_id) override;
  boost::asio::awaitable<AttemptOutcome> ListPage(ListWindow window, std::optional<std::string> page_token,
                                                  std::string request_id) override;

  // Counters for tests and metrics.
  struct PoolStats {
    std::uint64_t connections_opened = 0;
    std::uint64_t stale_discarded = 0;  // idle connections found closed (or too old) before reuse
    std::size_t open = 0;               // busy plus idle, now
    std::size_t idle = 0;
  };
  boost::asio::awaitable<PoolStats> Stats();

 private:
  class Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace charge_outbox::acquirer
