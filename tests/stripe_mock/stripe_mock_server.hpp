// stripe-mock (github.com/stripe/stripe-mock, built by tests/run into STRIPE_MOCK_BIN) started for one test:
// plain HTTP on 127.0.0.1 at a port below the ephemeral range, its HTTPS listener (on by default) moved to a
// unix socket so that nothing else listens on TCP; -strict-version-check, so that a Stripe-Version other than
// its spec's is refused. Stopped (SIGKILL) when destroyed.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "child_process.hpp"

namespace charge_outbox::testing {

class StripeMockServer {
 public:
  // Throws (failing the test) with stripe-mock's output if it does not listen in time.
  explicit StripeMockServer(const std::string& binary);
  ~StripeMockServer();
  StripeMockServer(const StripeMockServer&) = delete;
  StripeMockServer& operator=(const StripeMockServer&) = delete;

  std::uint16_t port() const { return port_; }
  // What it printed: a "Request: ..." and a "Response: ... status=N" line per request, and its validation error.
  std::string Output() const { return process_->CurrentOutput(); }

 private:
  std::filesystem::path dir_;
  std::unique_ptr<ChildProcess> process_;
  std::uint16_t port_ = 0;
};

}  // namespace charge_outbox::testing
