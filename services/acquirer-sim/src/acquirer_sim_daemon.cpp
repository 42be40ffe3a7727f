#include "acquirer_sim_daemon.hpp"

#include "acquirer_sim.hpp"

namespace charge_outbox::acquirer_sim {
namespace {

class AcquirerSimDaemon final : public app::Daemon {
 public:
  AcquirerSimDaemon() : app::Daemon({.name = "acquirer-sim",
                                         .usage = "usage: acquirer-sim [--config PATH]",
                                         .required = "auth.api_keys data.dir"}) {}

  app::Settings Configure(const std::vector<std::string>& args, config::ConfigReader& reader) override {
    // The start-up path took --config out already; acquirer-sim takes nothing else.
    if (!args.empty()) throw config::ConfigError("argv", std::string(profile().usage));
    config_ = LoadConfig(reader);
    return {.log_level = config_.log_level};
  }
  int Run(const app::ShutdownSignals& signals) override { return acquirer_sim::Run(config_, signals); }

 private:
  SimConfig config_;
};

}  // namespace

std::unique_ptr<app::Daemon> MakeDaemon() { return std::make_unique<AcquirerSimDaemon>(); }

}  // namespace charge_outbox::acquirer_sim
