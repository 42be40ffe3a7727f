// A daemon of ours started for an e2e test: the real binary, port 0, its environment; the ports come
// from the line every daemon logs at start: "listening on HOST:PORT" for its API, "admin on HOST:PORT"
// for its admin port (probes and metrics), either or both.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "child_process.hpp"

namespace charge_outbox::testing {

class ServiceProcess {
 public:
  // Throws (failing the test) with the daemon's output if it does not report its port in time.
  ServiceProcess(std::vector<std::string> argv, EnvChanges env,
                 std::chrono::milliseconds startup_timeout = std::chrono::seconds{20});

  // The API port (acquirer-sim's only port); 0 for a daemon with an admin port alone (outbox-relay).
  std::uint16_t port() const { return port_; }
  // /healthz, /readyz, /metrics; 0 for a daemon without one (acquirer-sim).
  std::uint16_t admin_port() const { return admin_port_; }
  ChildProcess& process() { return *process_; }
  std::string Output() const { return process_->CurrentOutput(); }

 private:
  std::unique_ptr<ChildProcess> process_;
  std::uint16_t port_ = 0;
  std::uint16_t admin_port_ = 0;
};

// Polls `condition` every few milliseconds until it holds or `timeout` passes; returns its last value.
template <class Condition>
bool Eventually(Condition condition, std::chrono::milliseconds timeout = std::chrono::seconds{10}) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds{5});
  }
  return condition();
}

}  // namespace charge_outbox::testing
