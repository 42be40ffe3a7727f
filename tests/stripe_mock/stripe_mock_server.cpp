#include "stripe_mock_server.hpp"

#include <chrono>
#include <stdexcept>
#include <vector>

#include "service_process.hpp"
#include "test_env.hpp"

namespace charge_outbox::testing {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

StripeMockServer::StripeMockServer(const std::string& binary)
    : dir_(fs::temp_directory_path() / UniqueName("stripe_mock")) {
  fs::create_directories(dir_);
  // A port free when chosen may be taken before stripe-mock binds it (ctest runs tests side by side): then it
  // exits at once, and another port is tried.
  std::string output;
  for (int attempt = 0; attempt < 3; ++attempt) {
    port_ = static_cast<std::uint16_t>(FreeLoopbackPort());
    const auto https_socket = dir_ / ("https-" + std::to_string(attempt) + ".sock");
    // -strict-version-check: a request whose Stripe-Version is not the one of the spec it checks against is
    // refused, so an accepted request was checked against the API version the adapter asks for.
    process_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{binary, "-http-addr", "127.0.0.1:" + std::to_string(port_), "-https-unix",
                                 https_socket.string(), "-strict-version-check"});
    const bool listening = Eventually(
        [&] { return Output().find("Listening for HTTP at address") != std::string::npos || !process_->Running(); },
        15s);
    output = Output();
    if (listening && process_->Running()) return;
    process_.reset();
  }
  fs::remove_all(dir_);
  throw std::runtime_error("stripe-mock did not start listening on 127.0.0.1 (" + binary + "):\n" + output);
}

StripeMockServer::~StripeMockServer() {
  process_.reset();
  std::error_code ignored;
  fs::remove_all(dir_, ignored);
}

}  // namespace charge_outbox::testing
