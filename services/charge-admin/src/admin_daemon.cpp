#include "admin_daemon.hpp"

#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <iostream>
#include <optional>
#include <sstream>

#include "admin_config.hpp"
#include "charge_outbox/acquirer/stripe_acquirer_client.hpp"
#include "charge_outbox/charges/charge_store.hpp"
#include "charge_outbox/charges/orphan_capture_store.hpp"
#include "charge_outbox/charges/review_store.hpp"
#include "charge_outbox/merchants/merchant_store.hpp"
#include "charge_outbox/util/file_output.hpp"
#include "charge_outbox/util/random.hpp"
#include "command_line.hpp"
#include "review_commands.hpp"

namespace charge_outbox::charge_admin {
namespace {

namespace asio = boost::asio;

class AdminDaemon final : public app::Daemon {
 public:
  // A person's command: Ctrl-C ends it like any command's (nothing it writes is half done: each change
  // is one statement).
  AdminDaemon() : app::Daemon({.name = "charge-admin",
                                  .usage = kUsage,
                                  .signals = false,
                                  .required = "database.url acquirer.url acquirer.api_key"}) {}

  app::Settings Configure(const std::vector<std::string>& args, config::ConfigReader& reader) override {
    command_ = ParseCommandLine(args);
    config_ = LoadConfig(reader);
    return {.log_level = config_.log_level, .schema_database_url = config_.database_url};
  }

  // The answer goes to stdout, alone: log lines go to stderr.
  void BeforeLogging() override {
    stdout_ = ::dup(STDOUT_FILENO);
    ::dup2(STDERR_FILENO, STDOUT_FILENO);
  }

  int StartFailed(const std::exception& error) override {
    std::cerr << "charge-admin: cannot start: " << error.what() << "\n";
    return 1;
  }

  int Run(const app::ShutdownSignals& /*signals*/) override {
    asio::io_context io;
    db::Database database(config_.database_url, config_.database);
    auto charges = charges::MakePgChargeStore(database);
    auto review = charges::MakePgReviewStore(database);
    auto merchant_store = merchants::MakePgMerchantStore(database);
    auto orphans = charges::MakePgOrphanCaptureStore(database);
    const auto acquirer_client = acquirer::MakeAcquirerClient(io.get_executor(), config_.acquirer);
    util::AsioClock clock;
    const acquirer::RetryPolicy policy(config_.acquirer.retry, std::make_shared<util::Mt19937RandomSource>());
    std::ostringstream out;
    Tools tools{*charges, *review, *merchant_store, *orphans, *acquirer_client, policy, clock, out, std::cerr};
    std::optional<int> status;
    asio::co_spawn(io, RunCommand(tools, command_), [&](std::exception_ptr failure, int value) {
      if (failure) {
        try {
          std::rethrow_exception(failure);
        } catch (const std::exception& e) {
          std::cerr << "charge-admin: " << e.what() << "; nothing more was done\n";
        }
      } else {
        status = value;
      }
      io.stop();
    });
    io.run();
    if (!util::WriteAll(stdout_, out.str())) {
      std::cerr << "charge-admin: writing the answer to stdout failed\n";
      return 1;
    }
    return status.value_or(1);
  }

 private:
  CommandLine command_;
  AdminConfig config_;
  int stdout_ = STDOUT_FILENO;
};

}  // namespace

std::unique_ptr<app::Daemon> MakeDaemon() { return std::make_unique<AdminDaemon>(); }

}  // namespace charge_outbox::charge_admin
