#include "test_env.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <fstream>
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

namespace charge_outbox::testing {

int FreeLoopbackPort() {
  int ephemeral_low = 32768;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> ephemeral_low;
  constexpr int kLowest = 20000;
  if (ephemeral_low <= kLowest + 1000) throw std::runtime_error("no room for fixed ports below the ephemeral range");
  std::mt19937 random(std::random_device{}());
  std::uniform_int_distribution<int> pick(kLowest, ephemeral_low - 1);
  for (int tries = 0; tries < 200; ++tries) {
    const int port = pick(random);
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) break;
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool free = ::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0;
    ::close(fd);
    if (free) return port;
  }
  throw std::runtime_error("no free loopback port found below the ephemeral range");
}

}  // namespace charge_outbox::testing
