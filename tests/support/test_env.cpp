#include "test_env.hpp"

#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <random>
#include <stdexcept>

namespace charge_outbox::testing {

std::string RequiredEnv(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  if (value == nullptr || *value == '\0') {
    throw std::runtime_error(name + " is not set: integration and e2e tests need the services that `tests/run` "
                                    "starts (run it, or export " + name + " yourself)");
  }
  return value;
}

std::string UniqueName(const std::string& prefix) {
  static std::atomic<int> counter{0};
  static const auto salt = std::random_device{}() % 100000;
  std::string name = prefix + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + "_" +
                     std::to_string(salt);
  for (auto& c : name) {
    c = std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::tolower(static_cast<unsigned char>(c)))
                                                    : '_';
  }
  return name;
}

}  // namespace charge_outbox::testing
