// RandomSource: uniform numbers in [0, 1), the one source of randomness behind every jittered wait
// (retry::Backoff), injectable so a test draws exactly the numbers it needs. Mt19937RandomSource is the
// real one.
#pragma once

#include <cstdint>
#include <mutex>
#include <random>

namespace charge_outbox::util {

class RandomSource {
 public:
  virtual ~RandomSource() = default;
  virtual double NextUnit() = 0;
};

// Thread-safe (one mutex); the seed is kept so a test can print it.
class Mt19937RandomSource final : public RandomSource {
 public:
  Mt19937RandomSource();  // seeded from std::random_device
  explicit Mt19937RandomSource(std::uint64_t seed);
  double NextUnit() override;
  std::uint64_t seed() const { return seed_; }

 private:
  std::uint64_t seed_;
  std::mutex mutex_;
  std::mt19937_64 engine_;
};

}  // namespace charge_outbox::util
