// One acquirer-sim process for the end-to-end tests of both dialects: the real binary on an ephemeral
// port with its own data directory, and the helpers every such test uses.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <regex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "child_process.hpp"
#include "http_test_client.hpp"
#include "test_env.hpp"

namespace charge_outbox::testing {

constexpr const char* kKeyA = "key_a";
constexpr const char* kKeyB = "key_b";

template <class Condition>
bool Eventually(Condition condition, std::chrono::milliseconds timeout = std::chrono::seconds{10}) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds{5});
  }
  return condition();
}

inline HttpHeaders Auth(const char* api_key, const std::string& idempotency_key = {}) {
  HttpHeaders headers{{"Authorization", std::string("Bearer ") + api_key}};
  if (!idempotency_key.empty()) headers.emplace_back("Idempotency-Key", idempotency_key);
  return headers;
}

// One simulator process. The port comes from its "listening on" log line (it binds port 0).
class Sim {
 public:
  Sim(const std::filesystem::path& data_dir, EnvChanges env = {}) {
    env.try_emplace("HTTP_PORT", "0");
    env.try_emplace("DATA_DIR", data_dir.string());
    env.try_emplace("AUTH_API_KEYS", std::string(kKeyA) + "," + kKeyB);
    env.try_emplace("SHUTDOWN_DEADLINE", "5s");
    process_ = std::make_unique<ChildProcess>(std::vector<std::string>{ACQUIRER_SIM_BIN}, env);
    const std::regex listening(R"(listening on [0-9.]+:([0-9]+))");
    std::smatch match;
    const bool up = Eventually([&] {
      output_ = process_->CurrentOutput();
      return std::regex_search(output_, match, listening);
    });
    if (!up) throw std::runtime_error("acquirer-sim did not report its port; output:\n" + output_);
    port_ = static_cast<std::uint16_t>(std::stoi(match[1]));
  }

  std::uint16_t port() const { return port_; }
  ChildProcess& process() { return *process_; }
  const std::string& startup_output() const { return output_; }
  HttpTestClient Client(std::chrono::milliseconds timeout = std::chrono::seconds{10}) const {
    return HttpTestClient(port_, "127.0.0.1", timeout);
  }

 private:
  std::unique_ptr<ChildProcess> process_;
  std::uint16_t port_ = 0;
  std::string output_;
};

// Every test leaves a simulator running (those that stop one start another): a crash shows here.
inline void ExpectStillRunning(Sim& sim) {
  auto probe = sim.Client(std::chrono::seconds{5});
  EXPECT_EQ(probe.Get("/healthz").status(), 200u) << "acquirer-sim died; output:\n" << sim.process().CurrentOutput();
}

}  // namespace charge_outbox::testing
