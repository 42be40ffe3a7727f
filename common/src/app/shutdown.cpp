#include "charge_outbox/app/shutdown.hpp"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include "charge_outbox/log/log.hpp"

namespace charge_outbox::app {

ShutdownSignals::ShutdownSignals() : ShutdownSignals(true) {}

ShutdownSignals::ShutdownSignals(bool block) : blocked_(block) {
  sigemptyset(&signals_);
  if (!blocked_) return;
  sigaddset(&signals_, SIGTERM);
  sigaddset(&signals_, SIGINT);
  if (const int rc = pthread_sigmask(SIG_BLOCK, &signals_, &previous_); rc != 0) {
    throw std::runtime_error(std::string("cannot block SIGTERM/SIGINT: ") + std::strerror(rc));
  }
}

ShutdownSignals ShutdownSignals::Unblocked() { return ShutdownSignals(false); }

ShutdownSignals::~ShutdownSignals() {
  if (blocked_) pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
}

int ShutdownSignals::Wait() const {
  for (;;) {
    int signal_number = 0;
    if (sigwait(&signals_, &signal_number) == 0) return signal_number;
  }
}

std::optional<int> ShutdownSignals::WaitFor(std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::max(std::chrono::nanoseconds{0}, deadline - std::chrono::steady_clock::now());
    const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(left);
    timespec wait{};
    wait.tv_sec = static_cast<std::time_t>(seconds.count());
    wait.tv_nsec = static_cast<long>((left - seconds).count());
    const int signal_number = sigtimedwait(&signals_, nullptr, &wait);
    if (signal_number > 0) return signal_number;
    if (errno == EAGAIN) return std::nullopt;
    // EINTR: another signal was handled meanwhile; wait for what is left.
  }
}

std::chrono::milliseconds DrainBudget(std::chrono::milliseconds deadline) {
  const auto reserve = std::min<std::chrono::milliseconds>(deadline / 4, std::chrono::seconds{2});
  return deadline - reserve;
}

void StopWithin(std::chrono::milliseconds deadline, const std::function<void(std::chrono::milliseconds)>& stop) {
  std::mutex mutex;
  std::condition_variable done_changed;
  bool done = false;
  std::thread watchdog([&] {
    std::unique_lock lock(mutex);
    if (done_changed.wait_for(lock, deadline, [&] { return done; })) return;
    spdlog::error("shutdown did not finish within {}ms; exiting with status {}", deadline.count(),
                  kExitShutdownOverrun);
    log::Flush();
    std::_Exit(kExitShutdownOverrun);
  });
  stop(DrainBudget(deadline));
  {
    std::lock_guard lock(mutex);
    done = true;
  }
  done_changed.notify_all();
  watchdog.join();
}

namespace {

int StopOnSignal(int signal_number, std::chrono::milliseconds deadline,
                 const std::function<void(std::chrono::milliseconds)>& stop) {
  spdlog::info("received {}; stopping within {}ms", signal_number == SIGTERM ? "SIGTERM" : "SIGINT",
               deadline.count());
  StopWithin(deadline, stop);
  spdlog::info("stopped");
  return 0;
}

}  // namespace

int RunUntilSignal(const ShutdownSignals& signals, std::chrono::milliseconds deadline,
                   const std::function<void(std::chrono::milliseconds)>& stop) {
  return StopOnSignal(signals.Wait(), deadline, stop);
}

int RunUntilSignal(const ShutdownSignals& signals, std::chrono::milliseconds deadline,
                   const std::function<void(std::chrono::milliseconds)>& stop,
                   const std::function<std::optional<int>()>& finished) {
  // 200ms: how late an end by itself is noticed; the pod is failing anyway by then.
  constexpr std::chrono::milliseconds kPoll{200};
  while (true) {
    if (const auto signal_number = signals.WaitFor(kPoll)) return StopOnSignal(*signal_number, deadline, stop);
    if (const auto status = finished()) {
      stop(std::chrono::milliseconds{0});
      return *status;
    }
  }
}

}  // namespace charge_outbox::app
