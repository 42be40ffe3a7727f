// How a handler's answer leaves, once the fault profile has decided: on time, late (timeout), or not at
// all (drop). Both dialects deliver through these, so a fault looks the same in either.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <string_view>

#include "charge_outbox/http/server.hpp"
#include "fault_profile.hpp"

namespace charge_outbox::acquirer_sim {

boost::asio::awaitable<void> Sleep(std::chrono::milliseconds duration);

inline http::Reply Answer(http::Response response) { return http::Reply{std::move(response), false}; }

// The work is done: drop the connection, or answer after the timeout delay, or answer now.
boost::asio::awaitable<http::Reply> Deliver(const FaultDecision& decision, http::Response response,
                                            std::string_view what);

}  // namespace charge_outbox::acquirer_sim
