// Fakes of util::Clock and util::RandomSource for unit tests of anything that waits or jitters: a clock
// that sleeps by advancing itself, and a random source that replays a script.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <utility>
#include <vector>

#include "charge_outbox/util/clock.hpp"
#include "charge_outbox/util/random.hpp"

namespace charge_outbox::testing {

// Sleeping advances both clocks by exactly the delay; every sleep is recorded.
class FakeClock final : public util::Clock {
 public:
  std::chrono::steady_clock::time_point SteadyNow() override { return steady_; }
  std::chrono::system_clock::time_point WallNow() override { return wall_; }
  boost::asio::awaitable<void> SleepFor(std::chrono::milliseconds delay) override {
    sleeps.push_back(delay);
    Advance(delay);
    co_return;
  }
  void Advance(std::chrono::milliseconds by) {
    steady_ += by;
    wall_ += by;
  }

  std::vector<std::chrono::milliseconds> sleeps;

 private:
  std::chrono::steady_clock::time_point steady_{std::chrono::hours{1}};
  std::chrono::system_clock::time_point wall_{std::chrono::sys_days{std::chrono::year{2024} / 3 / 10}};
};

// Returns the scripted values in order, then repeats the last one.
class ScriptedRandom final : public util::RandomSource {
 public:
  explicit ScriptedRandom(std::vector<double> values) : values_(std::move(values)) {}
  double NextUnit() override {
    const double v = values_.at(std::min(next_, values_.size() - 1));
    ++next_;
    return v;
  }

 private:
  std::vector<double> values_;
  std::size_t next_ = 0;
};

}  // namespace charge_outbox::testing
