// RelayApp: wires outbox-relay together: the relay session and the Kafka publisher driven by RelayLoop on
// a thread of its own, a second session that refreshes the backlog gauges and runs retention, and the
// HTTP server for /metrics, /healthz and /readyz.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>

#include "relay_config.hpp"

namespace charge_outbox::outbox_relay {

// Lifecycle: construct (throws kafka::KafkaConfigError on a bad property), Start() once, Stop() once.
class RelayApp {
 public:
  explicit RelayApp(RelayConfig config);
  ~RelayApp();

  // Starts the threads and the server; returns the bound HTTP port.
  std::uint16_t Start();
  // Stops the loop (a batch in flight is abandoned, nothing undelivered is marked), then the rest.
  void Stop(std::chrono::milliseconds drain);
  // The loop's exit status once it ended on its own (topic refused, a producer not recreated), else nullopt.
  std::optional<int> Finished() const;

 private:
  struct Parts;
  std::unique_ptr<Parts> parts_;
};

}  // namespace charge_outbox::outbox_relay
