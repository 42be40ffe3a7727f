#include "charge_outbox/acquirer/http_acquirer_client.hpp"

#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <sys/socket.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <boost/url/encode.hpp>
#include <boost/url/rfc/unreserved_chars.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <ctime>
#include <deque>
#include <functional>
#include <variant>
#include <vector>

#include "charge_outbox/acquirer/classifier.hpp"
#include "charge_outbox/config/config.hpp"
#include "charge_outbox/log/log.hpp"
#include "origin.hpp"

namespace charge_outbox::acquirer {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
namespace json = boost::json;
namespace urls = boost::urls;
using tcp = asio::ip::tcp;
using SteadyClock = std::chrono::steady_clock;
using Strand = asio::strand<asio::any_io_executor>;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;
using boost::system::error_code;

constexpr std::uint32_t kMaxResponseHeaderBytes = 16 * 1024;
constexpr const char* kUserAgent = "charge-outbox-acquirer-client/1";

// One HTTP request as the client builds it, before Beast sees it.
struct RequestSpec {
  http::verb method = http::verb::get;
  std::string target;
  std::string body;
  std::optional<std::string> idempotency_key;
  std::string request_id;
};

// One connection to the acquirer: exactly one of plain/tls is set. Touched only on the client's strand.
struct Connection {
  std::unique_ptr<beast::tcp_stream> plain;
  std::unique_ptr<TlsStream> tls;
  beast::flat_buffer buffer;
  SteadyClock::time_point idle_since;

  beast::tcp_stream& Tcp() { return tls ? tls->next_layer() : *plain; }
};

void Close(Connection& connection) {
  error_code ignored;
  connection.Tcp().socket().shutdown(tcp::socket::shutdown_both, ignored);
  connection.Tcp().close();
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

std::string Encode(std::string_view value) { return urls::encode(value, urls::unreserved_chars); }

bool IsHttpParseError(const error_code& ec) {
  return ec.category() == http::make_error_code(http::error::bad_status).category();
}

TransportStatus ReadFailure(const error_code& ec) {
  if (ec == beast::error::timeout) return TransportStatus::kResponseTimedOut;
  if (ec == http::error::end_of_stream || ec == http::error::partial_message || ec == http::error::short_read) {
    return TransportStatus::kConnectionDropped;
  }
  // Too large, or not HTTP: bytes came back, but not an answer we can read.
  if (IsHttpParseError(ec)) return TransportStatus::kResponseMalformed;
  // eof, reset, aborted, TLS stream_truncated, ...: the connection died under us after the write.
  return TransportStatus::kConnectionDropped;
}

TransportResult Failure(TransportStatus status, std::string detail, bool reused) {
  TransportResult result;
  result.status = status;
  result.detail = std::move(detail);
  result.reused_connection = reused;
  return result;
}

}  // namespace

class HttpAcquirerClient::Impl {
 public:
  Impl(asio::any_io_executor executor, AcquirerClientConfig config)
      : strand_(asio::make_strand(std::move(executor))),
        config_(std::move(config)),
        origin_(detail::ParseOrigin(config_.base_url)),
        authorization_("Bearer " + config_.api_key) {
    if (config_.max_connections == 0) throw config::ConfigError("acquirer.pool.max_connections", "must be at least 1");
    if (origin_.tls) SetUpTls();
  }

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
    auto stats = self->stats_;
    stats.open = self->open_;
    stats.idle = self->idle_.size();
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

  Strand strand_;

 private:
  // A pooled connection, or the right to open one (connection == nullptr), or a timeout.
  struct Lease {
    std::shared_ptr<Connection> connection;
    bool timed_out = false;
    bool queued = false;  // granted after waiting behind busy connections
  };

  struct Waiter {
    explicit Waiter(const Strand& strand) : timer(strand) {}
    asio::steady_timer timer;
    bool granted = false;
    std::shared_ptr<Connection> connection;  // when granted: a connection to reuse, or null to open one
  };

  // Gives the slot back when a call leaves Exchange by any path; the connection is reused only when
  // the call says so.
  class SlotGuard {
   public:
    explicit SlotGuard(Impl& impl) : impl_(impl) {}
    ~SlotGuard() {
      if (!done_) impl_.Release(std::move(connection_), false);
    }
    SlotGuard(const SlotGuard&) = delete;
    SlotGuard& operator=(const SlotGuard&) = delete;
    void Hold(std::shared_ptr<Connection> connection) { connection_ = std::move(connection); }
    void Release(bool reusable) {
      done_ = true;
      impl_.Release(std::move(connection_), reusable);
    }

   private:
    Impl& impl_;
    std::shared_ptr<Connection> connection_;
    bool done_ = false;
  };

  struct Opened {
    std::shared_ptr<Connection> connection;
    TransportResult failure;
  };

  struct ResolveState {
    explicit ResolveState(const Strand& strand) : resolver(strand), timer(strand) {}
    tcp::resolver resolver;
    asio::steady_timer timer;
    bool done = false;
    error_code ec;
    tcp::resolver::results_type results;
  };

  void SetUpTls() {
    tls_context_.emplace(ssl::context::tls_client);
    SSL_CTX_set_min_proto_version(tls_context_->native_handle(), TLS1_2_VERSION);
    if (!config_.tls_verify) {
      tls_context_->set_verify_mode(ssl::verify_none);
      spdlog::warn("acquirer client: TLS certificate verification is off (acquirer.tls.verify=false); "
                   "never do this against a real acquirer");
      return;
    }
    tls_context_->set_verify_mode(ssl::verify_peer);
    error_code ec;
    if (config_.tls_ca_file.empty()) {
      tls_context_->set_default_verify_paths(ec);
    } else {
      tls_context_->load_verify_file(config_.tls_ca_file, ec);
    }
    if (ec) {
      throw config::ConfigError(config_.tls_ca_file.empty() ? "acquirer.tls.verify" : "acquirer.tls.ca_file",
                                "cannot load trusted certificates: " + ec.message() +
                                    "; point acquirer.tls.ca_file at a readable PEM bundle");
    }
  }

  // Whether an idle pooled connection may carry another request. The acquirer may have closed it
  // while it sat idle; writing to it would then end in an "unknown" for a request that never reached
  // the acquirer's application. A FIN (or any unsolicited byte, such as a TLS close_notify or a 408)
  // already in the socket is visible without blocking, so look before reuse. A close that races this
  // check still ends as unknown: that is the conservative answer, and the caller's retry with the
  // same key is safe.
  bool StillUsable(Connection& connection) const {
    if (SteadyClock::now() - connection.idle_since >= config_.idle_timeout) return false;
    if (connection.buffer.size() != 0) return false;
    auto& socket = connection.Tcp().socket();
    if (!socket.is_open()) return false;
    char byte = 0;
    const auto n = ::recv(socket.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n >= 0) return false;
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }

  asio::awaitable<Lease> Acquire(SteadyClock::time_point deadline) {
    while (!idle_.empty()) {
      // Most recently used first: the warmest connection is the least likely to have been closed.
      auto connection = std::move(idle_.back());
      idle_.pop_back();
      if (StillUsable(*connection)) co_return Lease{std::move(connection), false};
      ++stats_.stale_discarded;
      Close(*connection);
      --open_;
    }
    if (open_ < config_.max_connections) {
      ++open_;
      co_return Lease{};
    }
    auto waiter = std::make_shared<Waiter>(strand_);
    waiter->timer.expires_at(deadline);
    waiters_.push_back(waiter);
    co_await waiter->timer.async_wait(asio::as_tuple(asio::use_awaitable));
    if (!waiter->granted) {
      std::erase(waiters_, waiter);
      co_return Lease{nullptr, true};
    }
    if (waiter->connection != nullptr && !StillUsable(*waiter->connection)) {
      ++stats_.stale_discarded;
      Close(*waiter->connection);
      waiter->connection.reset();  // keep the slot: open a fresh connection in it
    }
    co_return Lease{std::move(waiter->connection), false, true};
  }

  // Hands the slot (with the connection, if reusable) to the oldest waiter, or back to the pool.
  void Release(std::shared_ptr<Connection> connection, bool reusable) {
    if (connection != nullptr && !reusable) {
      Close(*connection);
      connection.reset();
    }
    if (connection != nullptr) connection->idle_since = SteadyClock::now();
    if (!waiters_.empty()) {
      auto waiter = std::move(waiters_.front());
      waiters_.pop_front();
      waiter->granted = true;
      waiter->connection = std::move(connection);
      waiter->timer.cancel();
      return;
    }
    if (connection != nullptr) {
      idle_.push_back(std::move(connection));
    } else {
      --open_;
    }
  }

  // getaddrinfo cannot be interrupted, so the deadline is enforced by not waiting for it: a late
  // answer lands in the shared state and is dropped.
  asio::awaitable<std::variant<tcp::resolver::results_type, TransportResult>> Resolve(
      SteadyClock::time_point deadline) {
    auto state = std::make_shared<ResolveState>(strand_);
    state->timer.expires_at(deadline);
    state->resolver.async_resolve(origin_.host, origin_.port,
                                  [state](const error_code& ec, tcp::resolver::results_type results) {
                                    state->done = true;
                                    state->ec = ec;
                                    state->results = std::move(results);
                                    state->timer.cancel();
                                  });
    co_await state->timer.async_wait(asio::as_tuple(asio::use_awaitable));
    if (!state->done) {
      state->resolver.cancel();
      co_return Failure(TransportStatus::kResolveTimedOut, "resolving " + origin_.host + " took too long", false);
    }
    if (state->ec || state->results.empty()) {
      co_return Failure(TransportStatus::kResolveFailed,
                        "resolving " + origin_.host + ": " + (state->ec ? state->ec.message() : "no address"), false);
    }
    co_return std::move(state->results);
  }

  asio::awaitable<Opened> Open(SteadyClock::time_point deadline) {
    const auto connect_deadline = std::min(deadline, SteadyClock::now() + config_.connect_timeout);
    auto resolved = co_await Resolve(connect_deadline);
    if (auto* failure = std::get_if<TransportResult>(&resolved)) co_return Opened{nullptr, std::move(*failure)};
    const auto& endpoints = std::get<tcp::resolver::results_type>(resolved);

    auto connection = std::make_shared<Connection>();
    if (origin_.tls) {
      connection->tls = std::make_unique<TlsStream>(strand_, *tls_context_);
    } else {
      connection->plain = std::make_unique<beast::tcp_stream>(strand_);
    }
    auto& stream = connection->Tcp();
    stream.expires_at(connect_deadline);
    const auto [connect_ec, endpoint] = co_await stream.async_connect(endpoints, asio::as_tuple(asio::use_awaitable));
    if (connect_ec) {
      const auto status = connect_ec == beast::error::timeout               ? TransportStatus::kConnectTimedOut
                          : connect_ec == asio::error::connection_refused ? TransportStatus::kConnectRefused
                                                                          : TransportStatus::kConnectFailed;
      co_return Opened{nullptr, Failure(status, "connecting to " + origin_.host_header + ": " +
                                                    (status == TransportStatus::kConnectTimedOut
                                                         ? std::string("timed out")
                                                         : connect_ec.message()),
                                        false)};
    }
    error_code ignored;
    stream.socket().set_option(tcp::no_delay(true), ignored);
    ++stats_.connections_opened;

    if (connection->tls) {
      SSL* ssl_handle = connection->tls->native_handle();
      if (!origin_.host_is_ip) {
        // SNI; called through SSL_ctrl because the SSL_set_tlsext_host_name macro casts C-style.
        SSL_ctrl(ssl_handle, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
                 const_cast<char*>(origin_.host.c_str()));
      }
      if (config_.tls_verify) {
        // The chain must also name this host: a valid certificate for another site is not the acquirer.
        const int ok = origin_.host_is_ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_handle),
                                                                          origin_.host.c_str())
                                          : SSL_set1_host(ssl_handle, origin_.host.c_str());
        if (ok != 1) {
          Close(*connection);
          co_return Opened{nullptr, Failure(TransportStatus::kTlsFailed, "cannot set the expected host name", false)};
        }
      }
      const auto [handshake_ec] =
          co_await connection->tls->async_handshake(ssl::stream_base::client, asio::as_tuple(asio::use_awaitable));
      if (handshake_ec) {
        Close(*connection);
        co_return Opened{nullptr,
                         Failure(TransportStatus::kTlsFailed,
                                 "TLS handshake with " + origin_.host_header + ": " +
                                     (handshake_ec == beast::error::timeout ? std::string("timed out")
                                                                            : handshake_ec.message()),
                                 false)};
      }
    }
    co_return Opened{std::move(connection), TransportResult{}};
  }

  http::request<http::string_body> BuildRequest(RequestSpec& spec) const {
    http::request<http::string_body> request{spec.method, spec.target, 11};
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

  template <class Stream>
  static asio::awaitable<TransportResult> WriteAndRead(Stream& stream, Connection& connection,
                                                       http::request<http::string_body>& request,
                                                       http::response_parser<http::string_body>& parser,
                                                       bool reused) {
    const auto [write_ec, written] = co_await http::async_write(stream, request, asio::as_tuple(asio::use_awaitable));
    if (write_ec) {
      // Conservative: a failed write may have delivered enough for the acquirer to act (see classifier).
      const auto status =
          write_ec == beast::error::timeout ? TransportStatus::kSendTimedOut : TransportStatus::kWriteFailed;
      co_return Failure(status, "writing the request: " + write_ec.message(), reused);
    }
    const auto [read_ec, read] =
        co_await http::async_read(stream, connection.buffer, parser, asio::as_tuple(asio::use_awaitable));
    if (read_ec) {
      const auto status = ReadFailure(read_ec);
      co_return Failure(status,
                        (status == TransportStatus::kResponseTimedOut ? std::string("no response before the deadline")
                                                                      : "reading the response: " + read_ec.message()),
                        reused);
    }
    TransportResult result;
    result.status = TransportStatus::kResponse;
    result.reused_connection = reused;
    co_return result;
  }

  static asio::awaitable<TransportResult> Exchange(std::shared_ptr<Impl> self, RequestSpec spec) {
    Impl& impl = *self;
    const auto deadline = SteadyClock::now() + impl.config_.request_timeout;
    auto lease = co_await impl.Acquire(deadline);
    if (lease.timed_out) {
      co_return Failure(TransportStatus::kPoolTimedOut, "no pooled connection came free before the deadline", false);
    }
    SlotGuard guard(impl);
    const bool reused = lease.connection != nullptr;
    // Our own queue is not the acquirer's doing: a call whose time went on waiting for a connection is
    // kPoolTimedOut, never a connect timeout that would read as "the acquirer is unreachable".
    const bool queue_ate_the_connect = lease.queued && deadline - SteadyClock::now() < impl.config_.connect_timeout;
    auto connection = std::move(lease.connection);
    if (reused) guard.Hold(connection);
    if (lease.queued && SteadyClock::now() >= deadline) {
      guard.Release(true);
      co_return Failure(TransportStatus::kPoolTimedOut, "the wait for a pooled connection used up the deadline",
                        reused);
    }
    if (!reused) {
      auto opened = co_await impl.Open(deadline);
      if (opened.connection == nullptr) {
        if (queue_ate_the_connect && opened.failure.status == TransportStatus::kConnectTimedOut) {
          co_return Failure(TransportStatus::kPoolTimedOut,
                            "the wait for a pooled connection left too little time to connect", false);
        }
        co_return std::move(opened.failure);
      }
      connection = std::move(opened.connection);
    }
    guard.Hold(connection);
    // Nothing has been written yet: if the deadline is already gone, say so now rather than start a
    // write that the stream's timer would cut at an arbitrary byte.
    if (SteadyClock::now() >= deadline) {
      guard.Release(true);
      co_return Failure(reused || lease.queued ? TransportStatus::kPoolTimedOut : TransportStatus::kConnectTimedOut,
                        "the deadline passed before the request could be written", reused);
    }

    auto request = impl.BuildRequest(spec);
    http::response_parser<http::string_body> parser;
    parser.body_limit(impl.config_.max_response_bytes);
    parser.header_limit(kMaxResponseHeaderBytes);
    connection->Tcp().expires_at(deadline);
    TransportResult result;
    if (connection->tls) {
      result = co_await WriteAndRead(*connection->tls, *connection, request, parser, reused);
    } else {
      result = co_await WriteAndRead(*connection->plain, *connection, request, parser, reused);
    }
    if (result.status != TransportStatus::kResponse) co_return result;  // the guard closes the connection

    auto message = parser.release();
    const bool reusable = message.keep_alive() && connection->buffer.size() == 0;
    connection->Tcp().expires_never();
    guard.Release(reusable);

    HttpResponse response;
    response.status = static_cast<int>(message.result_int());
    for (const auto& field : message) {
      response.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
    }
    response.body = std::move(message.body());
    result.response = std::move(response);
    co_return result;
  }

  AcquirerClientConfig config_;
  detail::Origin origin_;
  std::string authorization_;
  std::optional<ssl::context> tls_context_;
  std::vector<std::shared_ptr<Connection>> idle_;
  std::deque<std::shared_ptr<Waiter>> waiters_;
  std::size_t open_ = 0;  // slots taken: busy connections, connections being opened, and idle ones
  PoolStats stats_;
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

asio::awaitable<AttemptOutcome> HttpAcquirerClient::Capture(CaptureRequest request, std::string request_id) {
  RequestSpec spec;
  spec.method = http::verb::post;
  spec.target = impl_->Target("/v1/captures", {});
  spec.body = json::serialize(json::value{{"amount", request.amount},
                                          {"currency", request.currency},
                                          {"reference", request.reference},
                                          {"payment_method", request.payment_method}});
  spec.idempotency_key = request.idempotency_key;
  spec.request_id = std::move(request_id);
  return Impl::Call(impl_, std::move(spec),
                    [request = std::move(request)](const TransportResult& result,
                                                   std::chrono::system_clock::time_point now) {
                      return ClassifyCapture(result, request, now);
                    });
}

asio::awaitable<AttemptOutcome> HttpAcquirerClient::LookupByKey(LookupRequest request, std::string request_id) {
  RequestSpec spec;
  spec.method = http::verb::get;
  spec.target = impl_->Target("/v1/captures", {{"idempotency_key", request.idempotency_key}});
  spec.request_id = std::move(request_id);
  return Impl::Call(impl_, std::move(spec),
                    [request = std::move(request)](const TransportResult& result,
                                                   std::chrono::system_clock::time_point now) {
                      return ClassifyLookup(result, request, now);
                    });
}

asio::awaitable<AttemptOutcome> HttpAcquirerClient::Void(VoidRequest request, std::string request_id) {
  RequestSpec spec;
  spec.method = http::verb::post;
  spec.target = impl_->Target("/v1/captures/" + Encode(request.capture_id) + "/void", {});
  spec.body = "{}";
  spec.idempotency_key = std::move(request.idempotency_key);
  spec.request_id = std::move(request_id);
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
  RequestSpec spec;
  spec.method = http::verb::get;
  spec.target = impl_->Target("/v1/captures", params);
  spec.request_id = std::move(request_id);
  return Impl::Call(impl_, std::move(spec), &ClassifyListPage);
}

asio::awaitable<HttpAcquirerClient::PoolStats> HttpAcquirerClient::Stats() { return Impl::Stats(impl_); }

}  // namespace charge_outbox::acquirer
