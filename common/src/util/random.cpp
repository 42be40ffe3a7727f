#include "charge_outbox/util/random.hpp"

namespace charge_outbox::util {

Mt19937RandomSource::Mt19937RandomSource() : Mt19937RandomSource((std::uint64_t{std::random_device{}()} << 32) ^
                                                                  std::uint64_t{std::random_device{}()}) {}

Mt19937RandomSource::Mt19937RandomSource(std::uint64_t seed) : seed_(seed), engine_(seed) {}

double Mt19937RandomSource::NextUnit() {
  std::lock_guard lock(mutex_);
  return std::uniform_real_distribution<double>(0.0, 1.0)(engine_);
}

}  // namespace charge_outbox::util
