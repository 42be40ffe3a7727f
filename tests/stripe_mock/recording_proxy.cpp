#include "recording_proxy.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <exception>
#include <mutex>
#include <thread>

namespace charge_outbox::testing {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

std::optional<std::string> ProxiedExchange::Header(const std::string& name) const {
  for (const auto& [field, value] : headers) {
    if (beast::iequals(field, name)) return value;
  }
  return std::nullopt;
}

struct RecordingProxy::State {
  asio::io_context io;
  tcp::acceptor acceptor{io, tcp::endpoint(asio::ip::address_v4::loopback(), 0)};
  tcp::endpoint upstream;
  Substitute substitute;
  mutable std::mutex mutex;
  std::vector<ProxiedExchange> exchanges;
  std::thread thread;

  void Record(ProxiedExchange exchange) {
    std::lock_guard lock(mutex);
    exchanges.push_back(std::move(exchange));
  }

  // One adapter connection, kept alive as long as the adapter keeps it, over one connection to stripe-mock.
  static asio::awaitable<void> Serve(State* self, tcp::socket socket) {
    beast::tcp_stream adapter(std::move(socket));
    beast::tcp_stream mock(co_await asio::this_coro::executor);
    co_await mock.async_connect(self->upstream, asio::use_awaitable);
    beast::flat_buffer adapter_buffer;
    beast::flat_buffer mock_buffer;
    for (;;) {
      http::request<http::string_body> request;
      co_await http::async_read(adapter, adapter_buffer, request, asio::use_awaitable);
      ProxiedExchange exchange;
      exchange.method = std::string(request.method_string());
      exchange.target = std::string(request.target());
      for (const auto& field : request) {
        exchange.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
      }
      exchange.body = request.body();
      const bool keep_alive = request.keep_alive();

      co_await http::async_write(mock, request, asio::use_awaitable);
      http::response<http::string_body> response;
      co_await http::async_read(mock, mock_buffer, response, asio::use_awaitable);
      exchange.status = static_cast<int>(response.result_int());
      exchange.answer = response.body();
      if (self->substitute && exchange.status / 100 == 2) {
        if (auto body = self->substitute(exchange)) {
          response.body() = std::move(*body);
          exchange.substituted = true;
        }
      }
      self->Record(std::move(exchange));
      // stripe-mock answers chunked; the adapter gets a plain Content-Length body either way.
      response.prepare_payload();
      response.keep_alive(keep_alive);
      co_await http::async_write(adapter, response, asio::use_awaitable);
      if (!keep_alive) co_return;
    }
  }

  static asio::awaitable<void> Accept(State* self) {
    for (;;) {
      auto socket = co_await self->acceptor.async_accept(asio::use_awaitable);
      // A connection ends with an exception when either side closes it: that is how it ends, not a failure.
      asio::co_spawn(self->io, Serve(self, std::move(socket)), [](std::exception_ptr) {});
    }
  }
};

RecordingProxy::RecordingProxy(std::uint16_t upstream_port, Substitute substitute) : state_(std::make_unique<State>()) {
  state_->upstream = tcp::endpoint(asio::ip::address_v4::loopback(), upstream_port);
  state_->substitute = std::move(substitute);
  asio::co_spawn(state_->io, State::Accept(state_.get()), [](std::exception_ptr) {});
  state_->thread = std::thread([state = state_.get()] { state->io.run(); });
}

// The coroutines still suspended are destroyed with the io_context, after the thread that ran them.
RecordingProxy::~RecordingProxy() {
  state_->io.stop();
  state_->thread.join();
}

std::uint16_t RecordingProxy::port() const { return state_->acceptor.local_endpoint().port(); }

std::vector<ProxiedExchange> RecordingProxy::exchanges() const {
  std::lock_guard lock(state_->mutex);
  return state_->exchanges;
}

}  // namespace charge_outbox::testing
