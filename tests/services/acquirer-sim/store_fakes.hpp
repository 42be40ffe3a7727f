// Fakes for the store's unit tests: a log in memory that can be made to fail, and a clock the test moves.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include "capture_log.hpp"
#include "capture_store.hpp"

namespace charge_outbox::acquirer_sim {

class MemorySink final : public RecordSink {
 public:
  bool Append(std::string_view lines) override {
    if (fail) return false;
    data += lines;
    return true;
  }
  bool Truncate() override {
    data.clear();
    return true;
  }
  std::size_t Lines() const { return static_cast<std::size_t>(std::count(data.begin(), data.end(), '\n')); }

  std::string data;
  bool fail = false;
};

class FakeClock final : public Clock {
 public:
  std::int64_t NowMicros() const override { return now; }
  std::int64_t now = 1'800'000'000'000'000;
};

}  // namespace charge_outbox::acquirer_sim
