#include "late_records.hpp"

#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>

namespace charge_outbox::charge_api {

namespace asio = boost::asio;

LateRecords::LateRecords(asio::any_io_executor executor, ChargeApiProbe& probe, Options options)
    : executor_(std::move(executor)), probe_(probe), options_(options) {}

void LateRecords::Keep(std::string what, Write write) {
  probe_.SetLateRecords(++state_->outstanding);
  asio::co_spawn(executor_, Run(state_, &probe_, options_, std::move(what), std::move(write)), asio::detached);
}

void LateRecords::Stop() { state_->stopped = true; }

asio::awaitable<void> LateRecords::Run(std::shared_ptr<State> state, ChargeApiProbe* probe, Options options,
                                       std::string what, Write write) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  auto delay = options.first_retry;
  bool landed = false;
  for (int tries = 1; !landed && !state->stopped; ++tries) {
    const auto written = co_await write();
    if (written) {
      landed = true;
      if (tries > 1) spdlog::info("{}: on record after {} tries", what, tries);
      break;
    }
    if (tries == 1) spdlog::warn("{}: not on record yet ({}); trying again until it is", what, written.error().detail);
    timer.expires_after(delay);
    boost::system::error_code ignored;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
    delay = std::min(delay * 2, options.max_retry);
  }
  if (!landed) spdlog::warn("{}: not on record when this instance stopped", what);
  probe->SetLateRecords(--state->outstanding);
}

}  // namespace charge_outbox::charge_api
