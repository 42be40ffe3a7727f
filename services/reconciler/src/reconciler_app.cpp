#include "reconciler_app.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/json/serialize.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <string_view>
#include <thread>

#include "charge_outbox/acquirer/stripe_acquirer_client.hpp"
#include "charge_outbox/charges/charge_store.hpp"
#include "charge_outbox/charges/orphan_capture_store.hpp"
#include "charge_outbox/charges/reconciliation_store.hpp"
#include "charge_outbox/db/database.hpp"
#include "charge_outbox/log/log.hpp"
#include "charge_outbox/util/file_output.hpp"
#include "pending_sweep.hpp"
#include "reconciler_probe.hpp"
#include "window_reconciliation.hpp"

namespace charge_outbox::reconciler {
namespace {

namespace asio = boost::asio;

// The window report's lines, each written when the run makes it: to a descriptor (stdout), or into a file
// beside the target that is renamed over it at the end, so a reader never sees half a report. A write
// that fails is remembered (with its errno) and the rest are dropped.
class ReportOutput {
 public:
  ReportOutput(int fd, std::string path) : fd_(fd), path_(std::move(path)) {
    if (!path_.empty()) {
      file_.open(path_ + ".tmp", std::ios::binary | std::ios::trunc);
      if (!file_) failed_ = errno != 0 ? errno : EIO;
    }
  }

  void Write(const std::string& line) {
    if (failed_ != 0) return;
    if (path_.empty()) {
      if (!util::WriteAll(fd_, line)) failed_ = errno;
      return;
    }
    file_ << line;
    file_.flush();
    if (!file_) failed_ = errno != 0 ? errno : EIO;
  }

  // False when a line was lost; errno says why.
  bool Close() {
    if (!path_.empty() && file_.is_open()) {
      file_.close();
      if (failed_ == 0 && std::rename((path_ + ".tmp").c_str(), path_.c_str()) != 0) failed_ = errno;
    }
    errno = failed_;
    return failed_ == 0;
  }

 private:
  int fd_;
  std::string path_;
  std::ofstream file_;
  int failed_ = 0;
};

// Starts `work` (the sweep or the window report) on `io`. When it ends, `result` holds what it returned,
// or stays empty if it threw (logged as "the <what> failed: ..."), and `io` stops: the run is over.
template <typename T>
void SpawnRun(asio::io_context& io, asio::awaitable<T> work, std::optional<T>& result, std::string_view what) {
  asio::co_spawn(io, std::move(work), [&io, &result, what](std::exception_ptr failure, T value) {
    if (failure) {
      try {
        std::rethrow_exception(failure);
      } catch (const std::exception& e) {
        spdlog::error("the {} failed: {}", what, e.what());
      }
    } else {
      result = std::move(value);
    }
    io.stop();
  });
}

}  // namespace

struct ReconcilerApp::Parts {
  explicit Parts(ReconcilerConfig c)
      : config(std::move(c)),
        database(config.database_url, config.database),
        charges(charges::MakePgChargeStore(database)),
        store(charges::MakePgReconciliationStore(database)),
        orphans(charges::MakePgOrphanCaptureStore(database)),
        acquirer_client(acquirer::MakeAcquirerClient(io.get_executor(), config.acquirer)),
        policy(config.acquirer.retry, std::make_shared<util::Mt19937RandomSource>()),
        owner_id("reconciler/" + config.instance_id + "/" + acquirer::NewRequestId()) {}

  // Logs the summary line, pushes the metrics, and turns the run into an exit status.
  int Finish(const RunSummary& summary) {
    const auto now = std::chrono::system_clock::now();
    log::Flush();
    const auto line = SummaryLine(summary, now);
    std::fputs(line.c_str(), stdout);
    std::fflush(stdout);
    int status = summary.ok() ? 0 : kExitRunErrors;
    probe.Record(summary, started_at, now);
    if (!config.pushgateway.url.empty()) {
      const int http_status = probe.Push(config.pushgateway, summary.mode);
      if (http_status < 200 || http_status > 299) {
        // The run's work is done, but nobody will see its figures: fail the Job so that someone does.
        spdlog::error("pushing metrics to {} failed (status {}); check metrics.pushgateway.url",
                      config.pushgateway.url, http_status);
        status = kExitRunErrors;
      }
    }
    log::Flush();
    return status;
  }

  // A sweep that found nothing to do asked the acquirer nothing, so a wrong key would go unnoticed run
  // after run: it makes one lookup of a key nobody uses, and refused credentials fail the run, loudly. A
  // sweep with charges learns it from their lookups (each an error line with its HTTP status), and a
  // window report from its listing, without a lookup more. An acquirer that does not answer proves
  // nothing about the credentials.
  bool CredentialsRefused() {
    std::optional<acquirer::CredentialCheck> check;
    io.restart();  // the sweep's end stopped it
    SpawnRun(io, acquirer::CheckCredentials(*acquirer_client), check, "credential check");
    io.run();
    if (!check || check->verdict != acquirer::Credentials::kRefused) return false;
    spdlog::error("the acquirer refuses our credentials (HTTP {}: {}); check acquirer.api_key (ACQUIRER_API_KEY, "
                  "the Secret global.acquirer.apiKeySecret in the chart) and acquirer.url",
                  check->outcome.http_status.value_or(0), check->outcome.detail);
    return true;
  }

  ReconcilerConfig config;
  asio::io_context io;
  db::Database database;
  std::unique_ptr<charges::ChargeStore> charges;
  std::unique_ptr<charges::ReconciliationStore> store;
  std::unique_ptr<charges::OrphanCaptureStore> orphans;
  std::unique_ptr<acquirer::AcquirerClient> acquirer_client;  // acquirer.kind names the adapter
  util::AsioClock clock;
  acquirer::RetryPolicy policy;
  util::Mt19937RandomSource jitter;
  ReconcilerProbe probe;
  std::string owner_id;
  // When this run began: a clean run clears an earlier run's failure only if it started after it.
  std::chrono::system_clock::time_point started_at = std::chrono::system_clock::now();
};

ReconcilerApp::ReconcilerApp(ReconcilerConfig config) : parts_(std::make_unique<Parts>(std::move(config))) {}

ReconcilerApp::~ReconcilerApp() = default;

int ReconcilerApp::RunSweep(const app::ShutdownSignals& signals) {
  auto& p = *parts_;
  PendingSweep sweep({*p.charges, *p.store, *p.acquirer_client, p.policy, p.clock, p.jitter}, p.config.sweep,
                     p.owner_id);
  spdlog::info("sweep {}: pending charges older than {} ms, batches of {}, {} at once, budget {} ms, "
               "not-found policy {}",
               p.owner_id, p.config.sweep.grace_period.count(), p.config.sweep.batch_size,
               p.config.sweep.concurrency, p.config.sweep.time_budget.count(),
               ToString(p.config.sweep.decision.not_found_policy));
  std::optional<RunSummary> summary;
  SpawnRun(p.io, sweep.Run(), summary, "sweep");
  // SIGTERM (a Job past activeDeadlineSeconds, a node drain): stop starting charges and finish cleanly.
  std::jthread watcher([&](std::stop_token stop) {
    while (!stop.stop_requested()) {
      if (const auto signal = signals.WaitFor(std::chrono::milliseconds{200})) {
        spdlog::warn("signal {}: finishing the charges in progress, starting no more", *signal);
        asio::post(p.io, [&] { sweep.RequestStop(); });
        return;
      }
    }
  });
  p.io.run();
  watcher.request_stop();
  watcher.join();
  if (!summary) {
    RunSummary failed;
    failed.errors = 1;
    return p.Finish(failed);
  }
  if (summary->examined == 0 && p.CredentialsRefused()) ++summary->errors;
  return p.Finish(*summary);
}

int ReconcilerApp::RunWindow(const CommandLine& command, int report_fd) {
  auto& p = *parts_;
  const auto& sweep = p.config.sweep;
  const auto [from, to] = command.last
                              ? TrailingWindow(p.clock.WallNow(), *command.last, sweep.decision.visibility_window)
                              : Window{command.from, command.to};
  const auto& output = command.output;
  ReportOutput out(report_fd, output);
  const ReportSink report = [&out](const std::string& line) { out.Write(line); };
  WindowReconciliation window({*p.charges, *p.store, *p.orphans, *p.acquirer_client, p.policy, p.clock, report},
                              {p.config.acquirer.list_page_limit, sweep.decision.deadline + sweep.claim_lease,
                               sweep.decision.visibility_window, p.config.window.max_captures});
  std::optional<WindowResult> result;
  SpawnRun(p.io, window.Run(from, to), result, "window report");
  p.io.run();
  const bool written = out.Close();
  if (!result) {
    RunSummary failed;
    failed.mode = RunMode::kWindow;
    failed.errors = 1;
    return p.Finish(failed);
  }
  if (!written) {
    spdlog::error("writing the report to {} failed: {}", output.empty() ? "stdout" : output, std::strerror(errno));
    ++result->summary.errors;
  }
  return p.Finish(result->summary);
}

}  // namespace charge_outbox::reconciler
