// acquirer-sim: a fault-injectable card acquirer (its contract: README.md, "Endpoints") on the common
// HTTP server.
//
// AcquirerSim owns the capture log, the store replayed from it, the fault engine and the server. Its
// Handle() is the whole HTTP surface: a function from request to reply, routing to one handler per
// endpoint. What the handlers accept is in request_validation.hpp, what they answer in responses.hpp
// and problems.hpp; its configuration is in sim_config.hpp, and its start-up in acquirer_sim_daemon.hpp.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "capture_log.hpp"
#include "capture_store.hpp"
#include "charge_outbox/app/shutdown.hpp"
#include "charge_outbox/http/server.hpp"
#include "fault_profile.hpp"
#include "request_counts.hpp"
#include "sim_config.hpp"
#include "stripe_api.hpp"

namespace charge_outbox::acquirer_sim {

// The id a credential's captures are filed under, in memory and in the log: a hash, so the log never
// holds the credential itself.
std::string MerchantIdFor(std::string_view api_key);


class AcquirerSim {
 public:
  // Opens the log in config.data_dir and replays it. Throws LogError if it cannot (a start-up error).
  AcquirerSim(const SimConfig& config, const Clock& clock);
  ~AcquirerSim();
  AcquirerSim(const AcquirerSim&) = delete;
  AcquirerSim& operator=(const AcquirerSim&) = delete;

  // Binds and serves; returns the port. Throws std::system_error if the address cannot be bound.
  std::uint16_t Start();
  void Stop(std::chrono::milliseconds drain_deadline);

  std::size_t replayed_records() const { return replayed_records_; }
  const std::string& log_path() const { return log_.path(); }

  boost::asio::awaitable<http::Reply> Handle(http::Request request);

 private:
  boost::asio::awaitable<http::Reply> HandleCapture(const http::Request& request, MerchantIndex merchant);
  boost::asio::awaitable<http::Reply> HandleQuery(MerchantIndex merchant, std::string_view query);
  boost::asio::awaitable<http::Reply> HandleGetById(MerchantIndex merchant, std::string_view id);
  boost::asio::awaitable<http::Reply> HandleVoid(const http::Request& request, MerchantIndex merchant,
                                                 std::string_view id);
  boost::asio::awaitable<http::Reply> DeliverReplay(http::Response replayed);
  http::Response PutFaults(const http::Request& request);
  http::Response Ledger() const;
  http::Response Reset();
  // The merchant the Authorization header names, or std::nullopt for a missing or unknown credential.
  std::optional<MerchantIndex> Authenticate(const http::Request& request) const;
  void Count(RequestKind kind) { requests_.Count(kind); }
  http::Response Stats() const;

  const Clock& clock_;
  CaptureLogFile log_;
  CaptureStore store_;
  FaultEngine faults_;
  std::vector<std::pair<std::string, MerchantIndex>> credentials_;
  std::size_t replayed_records_ = 0;
  RequestCounts requests_;
  StripeApi stripe_;
  http::Server server_;  // last: destroyed first, so no handler outlives what it uses
};

// Runs the simulator until SIGTERM/SIGINT: start, log the bound port, wait, stop within the deadline.
// Returns the exit status: 0 stopped cleanly, 1 could not start (the log line says why).
int Run(const SimConfig& config, const app::ShutdownSignals& signals);

}  // namespace charge_outbox::acquirer_sim
