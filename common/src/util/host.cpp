#include "charge_outbox/util/host.hpp"

#include <unistd.h>

namespace charge_outbox::util {

std::string HostName(std::string_view fallback) {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) return std::string(fallback);
  return host;
}

std::string HostAndProcess(std::string_view fallback) { return HostName(fallback) + "-" + std::to_string(::getpid()); }

}  // namespace charge_outbox::util
