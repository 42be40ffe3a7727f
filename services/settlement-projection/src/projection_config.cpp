#include "projection_config.hpp"

#include <iterator>

#include "charge_outbox/config/config.hpp"
#include "charge_outbox/http/admin_listener.hpp"
#include "charge_outbox/log/log.hpp"
#include "api_tokens.hpp"

namespace charge_outbox::settlement {

ProjectionConfig LoadConfig(config::ConfigReader& r) {
  using std::chrono::milliseconds;
  using std::chrono::seconds;
  ProjectionConfig c;
  c.http.address = r.String("http.address", "0.0.0.0");
  c.http.port = static_cast<std::uint16_t>(r.Integer("http.port", 8090, 0, 65535));
  c.http.threads = static_cast<std::size_t>(r.Integer("http.threads", 1, 1, 64));
  c.http.max_connections = static_cast<std::size_t>(r.Integer("http.max_connections", 1'000, 1, 1'000'000));
  // Bounded like the admin port (issue 44): no client holds more than a tenth, a client with no connection
  // still gets in while others hold the rest, and an idle or trickling connection is closed in seconds.
  c.http.max_connections_per_client =
      static_cast<std::size_t>(r.Integer("http.max_connections_per_client", 100, 0, 1'000'000));
  c.http.reserved_for_new_clients = static_cast<std::size_t>(r.Integer("http.reserved_connections", 32, 0, 1'000'000));
  if (c.http.reserved_for_new_clients >= c.http.max_connections) {
    throw config::ConfigError("http.reserved_connections", "must be less than http.max_connections");
  }
  c.http.idle_timeout = r.Duration("http.idle_timeout", seconds{10}, milliseconds{100}, std::chrono::minutes{10});
  c.http.read_timeout = r.Duration("http.read_timeout", seconds{5}, milliseconds{100}, std::chrono::minutes{10});
  c.api_token_hashes = ParseTokenHashes("http.token_hashes", r.String("http.token_hashes", ""));
  c.admin = http::LoadAdminServerOptions(r);
  if (c.admin.port != 0 && c.admin.port == c.http.port) {
    throw config::ConfigError("admin.port", "must differ from http.port: probes and metrics never share the API port");
  }
  c.inbox = inbox::LoadInboxOptions(r, "settlement-projection");
  c.database_pool_size = static_cast<std::size_t>(r.Integer("database.pool_size", 4, 1, 256));
  // A healthy loop's longest step: a database call that times out, then the longest backoff.
  const auto longest_step = c.inbox.database.call_timeout + c.inbox.backoff.max + c.inbox.poll_timeout;
  c.liveness_timeout = r.Duration("inbox.liveness_timeout", seconds{60}, seconds{1});
  if (c.liveness_timeout <= longest_step) {
    throw config::ConfigError("inbox.liveness_timeout",
                              "must be longer than database.call_timeout + inbox.backoff.max + inbox.poll_timeout (" +
                                  std::to_string(longest_step.count()) + "ms), or a working consumer would be restarted");
  }
  c.readiness_reuse = r.Duration("readiness.reuse_for", seconds{1}, milliseconds{0}, std::chrono::minutes{1});
  c.shutdown_deadline = r.Duration("shutdown.deadline", seconds{10}, milliseconds{100});
  c.log_level = r.Choice("log.level", "info", {std::begin(log::kLevels), std::end(log::kLevels)});
  r.RejectUnknownKeys();
  r.RejectUnknownEnvironment({"inbox", "readiness"});
  return c;
}

void RequireApiTokens(const ProjectionConfig& config) {
  if (config.api_token_hashes.empty()) {
    throw config::ConfigError("http.token_hashes",
                              "required: the SHA-256 (hex) of each bearer token the API accepts, comma-separated "
                              "(HTTP_TOKEN_HASHES); make a token with `openssl rand -hex 32` and give its "
                              "`printf %s \"$TOKEN\" | sha256sum`");
  }
}

}  // namespace charge_outbox::settlement
