#include "charge_outbox/acquirer/http_acquirer_client.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <boost/url/encode.hpp>
#include <boost/url/rfc/unreserved_chars.hpp>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <ctime>
#include <functional>
#include <vector>

#include "charge_outbox/acquirer/classifier.hpp"
#include "charge_outbox/config/config.hpp"
#include "charge_outbox/log/log.hpp"
#include "connection_pool.hpp"
#include "dialer.hpp"
#include "exchange.hpp"
#include "origin.hpp"

namespace charge_outbox::acquirer {

namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
namespace json = boost::json;
namespace urls = boost::urls;
using detail::Failure;
using detail::SteadyClock;
using detail::Strand;

constexpr const char* kUserAgent = "charge-outbox-acquirer-client/1";

// One HTTP request as the client builds it, before Beast sees it.
struct RequestSpec {
  http::verb method = http::verb::get;
  std::string target;
  std::string body;
  std::optional<std::string> idempotency_key;
  std::string request_id;
};

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

std::string Encode(std::string_view value) { return urls::encode(value, urls::unreserved_chars); }

}  // namespace

// The client's state on its strand: the origin, the pool of connections, the dialer that fills it, and
// each call's way through them (a slot, a connection, one exchange). Lives as long as the client or
// the last call in flight.
class HttpAcquirerClient::Impl {
 public:
  Impl(asio::any_io_executor executor, AcquirerClientConfig config)
      : strand_(asio::make_strand(std::move(executor))),
        config_(std::move(config)),
        origin_(detail::ParseOrigin(config_.base_url)),
        authorization_("Bearer " + config_.api_key),
        pool_(strand_, ValidMaxConnections(config_), config_.idle_timeout),
        dialer_(strand_, origin_, config_) {}

  // Runs one request on the strand and resumes the caller on its own executor.
  static asio::awaitable<TransportResult> Send(std::shared_ptr<Impl> self, RequestSpec spec) {
    auto strand = self->strand_;
    co_return co_await asio::co_spawn(strand, Exchange(std::move(self), std::move(spec)), asio::use_awaitable);
  }

  static asio::awaitable<AttemptOutcome> Call(
      std::shared_ptr<Impl> self, RequestSpec spec,
      std::function<AttemptOutcome(const TransportResult&, std::chrono::system_clock::time_point)> classify);

  static asio::awaitable<PoolStats> Stats(std::shared_ptr<Impl> self) {
    auto strand = self->strand_;
    co_return co_await asio::co_spawn(strand, StatsOnStrand(std::move(self)), asio::use_awaitable);
  }

  static asio::awaitable<PoolStats> StatsOnStrand(std::shared_ptr<Impl> self) {
    auto stats = self->pool_.Stats();
    stats.connections_opened = self->dialer_.connections_opened();
    co_return stats;
  }

  std::string Target(std::string_view path, const std::vector<std::pair<std::string, std::string>>& params) const {
    std::string target = origin_.base_path;
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

 private:
  static std::size_t ValidMaxConnections(const AcquirerClientConfig& config) {
    if (config.max_connections == 0) throw config::ConfigError("acquirer.pool.max_connections", "must be at least 1");
    return config.max_connections;
  }

  detail::HttpRequest BuildRequest(RequestSpec& spec) const {
    detail::HttpRequest request{spec.method, spec.target, 11};
    request.set(http::field::host, origin_.host_header);
    request.set(http::field::user_agent, kUserAgent);
    request.set(http::field::authorization, authorization_);
    request.set(http::field::accept, "application/json");
    if (spec.idempotency_key.has_value()) request.set("Idempotency-Key", *spec.idempotency_key);
    request.set("X-Request-Id", spec.request_id);
    if (spec.method == http::verb::post) {
      request.set(http::field::content_type, "application/json");
      request.body() = std::move(spec.body);
    }
    request.keep_alive(true);
    request.prepare_payload();
    return request;
  }

  static asio::awaitable<TransportResult> Exchange(std::shared_ptr<Impl> self, RequestSpec spec) {
    Impl& impl = *self;
    const auto deadline = SteadyClock::now() + impl.config_.request_timeout;
    auto lease = co_await impl.pool_.Acquire(deadline);
    if (lease.timed_out) {
      co_return Failure(TransportStatus::kPoolTimedOut, "no pooled connection came free before the deadline", false);
    }
    detail::ConnectionPool::Slot slot(impl.pool_);
    const bool reused = lease.connection != nullptr;
    // Our own queue is not the acquirer's doing: a call whose time went on waiting for a connection is
    // kPoolTimedOut, never a connect timeout that would read as "the acquirer is unreachable".
    const bool queue_ate_the_connect = lease.queued && deadline - SteadyClock::now() < impl.config_.connect_timeout;
    auto connection = std::move(lease.connection);
    if (reused) slot.Hold(connection);
    if (lease.queued && SteadyClock::now() >= deadline) {
      slot.Release(true);
      co_return Failure(TransportStatus::kPoolTimedOut, "the wait for a pooled connection used up the deadline",
                        reused);
    }
    if (!reused) {
      auto opened = co_await impl.dialer_.Open(deadline);
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

    auto request = impl.BuildRequest(spec);
    auto exchanged = co_await detail::Exchange(*connection, request, deadline, impl.config_.max_response_bytes, reused);
    // A connection that failed mid-exchange is closed by the slot.
    if (exchanged.result.status == TransportStatus::kResponse) slot.Release(exchanged.reusable);
    co_return std::move(exchanged.result);
  }

  Strand strand_;
  AcquirerClientConfig config_;
  detail::Origin origin_;
  std::string authorization_;
  detail::ConnectionPool pool_;
  detail::Dialer dialer_;
};

HttpAcquirerClient::HttpAcquirerClient(asio::any_io_executor executor, AcquirerClientConfig config)
    : impl_(std::make_shared<Impl>(std::move(executor), std::move(config))) {}

HttpAcquirerClient::~HttpAcquirerClient() = default;

namespace {

using Classifier = std::function<AttemptOutcome(const TransportResult&, std::chrono::system_clock::time_point)>;

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

// The public methods are not coroutines: they build the request at once and hand a coroutine that owns
// the client's internals, so an awaitable outlives the HttpAcquirerClient object safely.
asio::awaitable<AttemptOutcome> HttpAcquirerClient::Impl::Call(std::shared_ptr<Impl> self, RequestSpec spec,
                                                               Classifier classify) {
  const auto started = SteadyClock::now();
  const auto request_id = spec.request_id;
  const auto result = co_await Send(std::move(self), std::move(spec));
  auto outcome = classify(result, std::chrono::system_clock::now());
  LogOutcome(outcome, request_id, started);
  co_return outcome;
}

namespace {

// A classifier that reads the answer against the request that was sent (a capture, a lookup).
template <class Sent>
Classifier Against(AttemptOutcome (*classify)(const TransportResult&, const Sent&, std::chrono::system_clock::time_point),
                   Sent sent) {
  return [classify, sent = std::move(sent)](const TransportResult& result, std::chrono::system_clock::time_point now) {
    return classify(result, sent, now);
  };
}

}  // namespace

asio::awaitable<AttemptOutcome> HttpAcquirerClient::Capture(CaptureRequest request, std::string request_id) {
  RequestSpec spec{http::verb::post, impl_->Target("/v1/captures", {}),
                   json::serialize(json::value{{"amount", request.amount},
                                               {"currency", request.currency},
                                               {"reference", request.reference},
                                               {"payment_method", request.payment_method}}),
                   request.idempotency_key, std::move(request_id)};
  return Impl::Call(impl_, std::move(spec), Against(&ClassifyCapture, std::move(request)));
}

asio::awaitable<AttemptOutcome> HttpAcquirerClient::LookupByKey(LookupRequest request, std::string request_id) {
  RequestSpec spec{http::verb::get, impl_->Target("/v1/captures", {{"idempotency_key", request.idempotency_key}}),
                   {}, std::nullopt, std::move(request_id)};
  return Impl::Call(impl_, std::move(spec), Against(&ClassifyLookup, std::move(request)));
}

asio::awaitable<AttemptOutcome> HttpAcquirerClient::Void(VoidRequest request, std::string request_id) {
  RequestSpec spec{http::verb::post, impl_->Target("/v1/captures/" + Encode(request.capture_id) + "/void", {}), "{}",
                   std::move(request.idempotency_key), std::move(request_id)};
  return Impl::Call(impl_, std::move(spec), &ClassifyVoid);
}

asio::awaitable<AttemptOutcome> HttpAcquirerClient::ListPage(ListWindow window, std::optional<std::string> page_token,
                                                             std::string request_id) {
  std::vector<std::pair<std::string, std::string>> params = {
      {"created_from", Rfc3339Micros(window.created_from)},
      {"created_to", Rfc3339Micros(window.created_to)},
      {"limit", std::to_string(window.limit)},
  };
  if (page_token.has_value()) params.emplace_back("page_token", std::move(*page_token));
  RequestSpec spec{http::verb::get, impl_->Target("/v1/captures", params), {}, std::nullopt, std::move(request_id)};
  return Impl::Call(impl_, std::move(spec), &ClassifyListPage);
}

asio::awaitable<HttpAcquirerClient::PoolStats> HttpAcquirerClient::Stats() { return Impl::Stats(impl_); }

}  // namespace charge_outbox::acquirer
