#include "dialer.hpp"

#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <variant>

#include "charge_outbox/config/config.hpp"

namespace charge_outbox::acquirer::detail {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using boost::system::error_code;

struct ResolveState {
  explicit ResolveState(const Strand& strand) : resolver(strand), timer(strand) {}
  tcp::resolver resolver;
  asio::steady_timer timer;
  bool done = false;
  error_code ec;
  tcp::resolver::results_type results;
};

// getaddrinfo cannot be interrupted, so the deadline is enforced by not waiting for it: a late
// answer lands in the shared state and is dropped.
asio::awaitable<std::variant<tcp::resolver::results_type, TransportResult>> Resolve(
    const Strand& strand, const Origin& origin, SteadyClock::time_point deadline) {
  auto state = std::make_shared<ResolveState>(strand);
  state->timer.expires_at(deadline);
  state->resolver.async_resolve(origin.host, origin.port,
                                [state](const error_code& ec, tcp::resolver::results_type results) {
                                  state->done = true;
                                  state->ec = ec;
                                  state->results = std::move(results);
                                  state->timer.cancel();
                                });
  co_await state->timer.async_wait(asio::as_tuple(asio::use_awaitable));
  if (!state->done) {
    state->resolver.cancel();
    co_return Failure(TransportStatus::kResolveTimedOut, "resolving " + origin.host + " took too long", false);
  }
  if (state->ec || state->results.empty()) {
    co_return Failure(TransportStatus::kResolveFailed,
                      "resolving " + origin.host + ": " + (state->ec ? state->ec.message() : "no address"), false);
  }
  co_return std::move(state->results);
}

}  // namespace

Dialer::Dialer(const Strand& strand, const Origin& origin, const AcquirerClientConfig& config)
    : strand_(strand), origin_(origin), config_(config) {
  if (origin_.tls) SetUpTls();
}

void Dialer::SetUpTls() {
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

asio::awaitable<Dialer::Opened> Dialer::Open(SteadyClock::time_point deadline) {
  const auto connect_deadline = std::min(deadline, SteadyClock::now() + config_.connect_timeout);
  auto resolved = co_await Resolve(strand_, origin_, connect_deadline);
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
  ++connections_opened_;

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
        connection->Close();
        co_return Opened{nullptr, Failure(TransportStatus::kTlsFailed, "cannot set the expected host name", false)};
      }
    }
    const auto [handshake_ec] =
        co_await connection->tls->async_handshake(ssl::stream_base::client, asio::as_tuple(asio::use_awaitable));
    if (handshake_ec) {
      connection->Close();
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

}  // namespace charge_outbox::acquirer::detail
