// Runs an awaitable to completion on an io_context from a plain test body. Work that outlives the
// awaitable (a test server's accept loop) is left pending; a hang fails the test instead of blocking.
#pragma once

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <exception>
#include <optional>
#include <stdexcept>

namespace charge_outbox::acquirer::testing {

template <typename T>
T RunSync(boost::asio::io_context& io, boost::asio::awaitable<T> awaitable,
          std::chrono::seconds limit = std::chrono::seconds{20}) {
  std::optional<T> value;
  std::exception_ptr error;
  bool done = false;
  boost::asio::co_spawn(io, std::move(awaitable), [&](std::exception_ptr e, T v) {
    error = e;
    if (!e) value.emplace(std::move(v));
    done = true;
  });
  const auto give_up = std::chrono::steady_clock::now() + limit;
  io.restart();
  while (!done) {
    if (std::chrono::steady_clock::now() > give_up) throw std::runtime_error("RunSync: the awaitable did not finish");
    io.run_one_for(std::chrono::milliseconds{100});
    if (io.stopped()) io.restart();
  }
  if (error) std::rethrow_exception(error);
  return std::move(*value);
}

}  // namespace charge_outbox::acquirer::testing
