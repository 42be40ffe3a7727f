#include "http_transport.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/url/encode.hpp>
#include <boost/url/rfc/unreserved_chars.hpp>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <ctime>

#include "charge_outbox/config/config.hpp"
#include "charge_outbox/log/log.hpp"
#include "connection_pool.hpp"
#include "dialer.hpp"
#include "exchange.hpp"
#include "origin.hpp"

namespace charge_outbox::acquirer::detail {

namespace asio = boost::asio;
namespace http = boost::beast::http;

namespace {

constexpr const char* kUserAgent = "charge-outbox-acquirer-client/1";

std::size_t ValidMaxConnections(const AcquirerClientConfig& config) {
  if (config.max_connections == 0) throw config::ConfigError("acquirer.pool.max_connections", "must be at least 1");
  return config.max_connections;
}

void LogOutcome(const AttemptOutcome& outcome, const std::string& request_id, SteadyClock::time_point started) {
  if (!spdlog::should_log(spdlog::level::debug)) return;
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - started).count();
  // The client is not told whose call this is, and a trace id the thread holds here would be whatever
  // else runs on it: the line carries none. Its request_id names the attempt, which acquirer_attempts
  // ties to the charge (and the charge's lines carry its trace id).
  log::WithTrace("", spdlog::level::debug,
                 "acquirer {} request_id={} outcome={} evidence={} http_status={} reused={} took_ms={} detail=\"{}\"",
                 ToString(outcome.operation), request_id, ToString(outcome.kind), ToString(outcome.evidence()),
                 outcome.http_status.value_or(0), outcome.reused_connection, ms, outcome.detail);
}

}  // namespace

// The transport's state on its strand: the origin, the pool of connections, the dialer that fills it, and
// each call's way through them (a slot, a connection, one exchange). Lives as long as the transport or the
// last call in flight.
class HttpTransport::State {
 public:
  State(asio::any_io_executor executor, AcquirerClientConfig config)
      : strand_(asio::make_strand(std::move(executor))),
        config_(std::move(config)),
        origin_(ParseOrigin(config_.base_url)),
        authorization_("Bearer " + config_.api_key),
        pool_(strand_, ValidMaxConnections(config_), config_.idle_timeout),
        dialer_(strand_, origin_, config_) {}

  static asio::awaitable<TransportResult> Exchange(std::shared_ptr<State> self, RequestSpec spec) {
    State& state = *self;
    const auto deadline = SteadyClock::now() + state.config_.request_timeout;
    auto lease = co_await state.pool_.Acquire(deadline);
    if (lease.timed_out) {
      co_return Failure(TransportStatus::kPoolTimedOut, "no pooled connection came free before the deadline", false);
    }
    ConnectionPool::Slot slot(state.pool_);
    const bool reused = lease.connection != nullptr;
    // Our own queue is not the acquirer's doing: a call whose time went on waiting for a connection is
    // kPoolTimedOut, never a connect timeout that would read as "the acquirer is unreachable".
    const bool queue_ate_the_connect = lease.queued && deadline - SteadyClock::now() < state.config_.connect_timeout;
    auto connection = std::move(lease.connection);
    if (reused) slot.Hold(connection);
    if (lease.queued && SteadyClock::now() >= deadline) {
      slot.Release(true);
      co_return Failure(TransportStatus::kPoolTimedOut, "the wait for a pooled connection used up the deadline",
                        reused);
    }
    if (!reused) {
      auto opened = co_await state.dialer_.Open(deadline);
      if (opened.connection == nullptr) {
        if (queue_ate_the_connect && opened.failure.status == TransportStatus::kConnectTimedOut) {
          co_return Failure(TransportStatus::kPoolTimedOut,
                            "the wait for a pooled connection left too little time to connect", false);
        }
        co_return std::move(opened.failure);
      }
      connection = std::move(opened.connection);
    }
    slot.Hold(connection);
    // Nothing has been written yet: if the deadline is already gone, say so now rather than start a
    // write that the stream's timer would cut at an arbitrary byte.
    if (SteadyClock::now() >= deadline) {
      slot.Release(true);
      co_return Failure(reused || lease.queued ? TransportStatus::kPoolTimedOut : TransportStatus::kConnectTimedOut,
                        "the deadline passed before the request could be written", reused);
    }

    auto request = state.BuildRequest(spec);
    auto exchanged =
        co_await detail::Exchange(*connection, request, deadline, state.config_.max_response_bytes, reused);
    // A connection that failed mid-exchange is closed by the slot.
    if (exchanged.result.status == TransportStatus::kResponse) slot.Release(exchanged.reusable);
    co_return std::move(exchanged.result);
  }

  static asio::awaitable<HttpAcquirerClient::PoolStats> StatsOnStrand(std::shared_ptr<State> self) {
    auto stats = self->pool_.Stats();
    stats.connections_opened = self->dialer_.connections_opened();
    co_return stats;
  }

  Strand strand_;
  AcquirerClientConfig config_;
  Origin origin_;

 private:
  HttpRequest BuildRequest(RequestSpec& spec) const {
    HttpRequest request{spec.method, spec.target, 11};
    request.set(http::field::host, origin_.host_header);
    request.set(http::field::user_agent, kUserAgent);
    request.set(http::field::authorization, authorization_);
    request.set(http::field::accept, "application/json");
    if (spec.idempotency_key.has_value()) request.set("Idempotency-Key", *spec.idempotency_key);
    request.set("X-Request-Id", spec.request_id);
    for (const auto& [name, value] : spec.headers) request.set(name, value);
    if (spec.method == http::verb::post) {
      request.set(http::field::content_type, spec.content_type);
      request.body() = std::move(spec.body);
    }
    request.keep_alive(true);
    request.prepare_payload();
    return request;
  }

  std::string authorization_;
  ConnectionPool pool_;
  Dialer dialer_;
};

HttpTransport::HttpTransport(asio::any_io_executor executor, AcquirerClientConfig config)
    : state_(std::make_shared<State>(std::move(executor), std::move(config))) {}

HttpTransport::~HttpTransport() = default;

const AcquirerClientConfig& HttpTransport::config() const { return state_->config_; }

std::string HttpTransport::Target(std::string_view path, const Params& params) const {
  std::string target = state_->origin_.base_path;
  target += path;
  char separator = '?';
  for (const auto& [name, value] : params) {
    target += separator;
    target += Encode(name);
    target += '=';
    target += Encode(value);
    separator = '&';
  }
  return target;
}

asio::awaitable<TransportResult> HttpTransport::Send(std::shared_ptr<HttpTransport> self, RequestSpec spec) {
  // The state, not the transport, goes to the strand: a call in flight keeps it alive on its own.
  auto state = self->state_;
  auto strand = state->strand_;
  co_return co_await asio::co_spawn(strand, State::Exchange(std::move(state), std::move(spec)), asio::use_awaitable);
}

asio::awaitable<AttemptOutcome> HttpTransport::Call(std::shared_ptr<HttpTransport> self, RequestSpec spec,
                                                    Classifier classify) {
  const auto started = SteadyClock::now();
  const auto request_id = spec.request_id;
  const auto result = co_await Send(std::move(self), std::move(spec));
  auto outcome = classify(result, std::chrono::system_clock::now());
  LogOutcome(outcome, request_id, started);
  co_return outcome;
}

asio::awaitable<HttpAcquirerClient::PoolStats> HttpTransport::Stats(std::shared_ptr<HttpTransport> self) {
  auto state = self->state_;
  auto strand = state->strand_;
  co_return co_await asio::co_spawn(strand, State::StatsOnStrand(std::move(state)), asio::use_awaitable);
}

std::string Encode(std::string_view value) { return boost::urls::encode(value, boost::urls::unreserved_chars); }

std::string FormBody(const Params& params) {
  std::string body;
  for (const auto& [name, value] : params) {
    if (!body.empty()) body += '&';
    body += Encode(name);
    body += '=';
    body += Encode(value);
  }
  return body;
}

// Microseconds, so that a capture's created_at passed back as a bound keeps its precision.
std::string Rfc3339Micros(std::chrono::system_clock::time_point tp) {
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(tp.time_since_epoch()).count();
  const auto secs = static_cast<std::time_t>(us / 1'000'000 - (us % 1'000'000 < 0 ? 1 : 0));
  const auto micros = static_cast<int>(((us % 1'000'000) + 1'000'000) % 1'000'000);
  std::tm utc{};
  gmtime_r(&secs, &utc);
  char buf[48];
  const int n = std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", utc.tm_year + 1900,
                              utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, micros);
  return std::string(buf, static_cast<std::size_t>(n));
}

}  // namespace charge_outbox::acquirer::detail
