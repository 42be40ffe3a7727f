// LateRecords: facts a request could not write before it answered, written as soon as the database takes
// them. A request answered 503 after an intent whose commit it never learned, or after a run whose attempts
// never left this process, knows something the record does not show yet: nothing was sent. Until it is on
// record, the attempt reads as "a capture may have left", and the reconciler would capture a charge whose
// client was only told to retry. Each write is idempotent and retried with backoff until it lands or the
// process stops; what a process that dies first leaves unwritten is the residual docs/charge-api.md names.
//
// Thread safety: Keep() may be called from any thread. The writes run on the executor given at
// construction; Stop() ends them (no new try after it), and frames still waiting are destroyed with their
// io_context, so nothing they use may be owned by this object alone (the state they share is ref-counted).
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "charge_api_probe.hpp"
#include "charge_outbox/db/database.hpp"

namespace charge_outbox::charge_api {

class LateRecords {
 public:
  using Write = std::function<boost::asio::awaitable<db::DbResult<void>>()>;

  struct Options {
    std::chrono::milliseconds first_retry{500};
    std::chrono::milliseconds max_retry{std::chrono::seconds{30}};
  };

  LateRecords(boost::asio::any_io_executor executor, ChargeApiProbe& probe, Options options);
  LateRecords(boost::asio::any_io_executor executor, ChargeApiProbe& probe)
      : LateRecords(std::move(executor), probe, Options{}) {}

  // Writes `write` now and, while it fails, again after a growing delay. `what` names it in the logs.
  void Keep(std::string what, Write write);
  // No new try after this; a write in progress finishes.
  void Stop();
  // Writes not yet landed.
  int Outstanding() const { return state_->outstanding.load(); }

 private:
  struct State {
    std::atomic<int> outstanding{0};
    std::atomic<bool> stopped{false};
  };
  static boost::asio::awaitable<void> Run(std::shared_ptr<State> state, ChargeApiProbe* probe, Options options,
                                          std::string what, Write write);

  boost::asio::any_io_executor executor_;
  ChargeApiProbe& probe_;
  Options options_;
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

}  // namespace charge_outbox::charge_api
