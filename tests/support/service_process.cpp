#include "service_process.hpp"

#include <regex>
#include <stdexcept>

namespace charge_outbox::testing {

ServiceProcess::ServiceProcess(std::vector<std::string> argv, EnvChanges env,
                               std::chrono::milliseconds startup_timeout) {
  process_ = std::make_unique<ChildProcess>(argv, env);
  const std::regex listening(R"(listening on [0-9.]+:([0-9]+))");
  std::smatch match;
  std::string output;
  const bool up = Eventually(
      [&] {
        output = process_->CurrentOutput();
        return std::regex_search(output, match, listening);
      },
      startup_timeout);
  if (!up) throw std::runtime_error(argv.at(0) + " did not report its port; output:\n" + output);
  port_ = static_cast<std::uint16_t>(std::stoi(match[1]));
}

}  // namespace charge_outbox::testing
