#include "service_process.hpp"

#include <regex>
#include <stdexcept>

namespace charge_outbox::testing {

ServiceProcess::ServiceProcess(std::vector<std::string> argv, EnvChanges env,
                               std::chrono::milliseconds startup_timeout) {
  process_ = std::make_unique<ChildProcess>(argv, env);
  // The whole line, so that a port half written is never read.
  const std::regex line(R"((listening|admin) on [0-9.]+:[0-9]+[^\n]*\n)");
  std::string output;
  std::smatch match;
  const bool up = Eventually(
      [&] {
        output = process_->CurrentOutput();
        return std::regex_search(output, match, line);
      },
      startup_timeout);
  if (!up) throw std::runtime_error(argv.at(0) + " did not report its port; output:\n" + output);
  const std::string started = match[0];
  std::smatch port;
  if (std::regex_search(started, port, std::regex(R"(listening on [0-9.]+:([0-9]+))"))) {
    port_ = static_cast<std::uint16_t>(std::stoi(port[1]));
  }
  if (std::regex_search(started, port, std::regex(R"(admin on [0-9.]+:([0-9]+))"))) {
    admin_port_ = static_cast<std::uint16_t>(std::stoi(port[1]));
  }
}

}  // namespace charge_outbox::testing
