// Runs a coroutine to completion on an io_context of its own: for tests of code whose interface is
// asio::awaitable (the stores), called from a plain test body.
#pragma once

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <utility>

namespace charge_outbox::testing {

template <typename T>
T Await(boost::asio::awaitable<T> op) {
  boost::asio::io_context io;
  auto result = boost::asio::co_spawn(io, std::move(op), boost::asio::use_future);
  io.run();
  return result.get();
}

}  // namespace charge_outbox::testing
