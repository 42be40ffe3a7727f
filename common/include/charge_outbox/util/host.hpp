// The machine's name, for the default instance ids of the daemons (the pod's name under Kubernetes).
#pragma once

#include <string>
#include <string_view>

namespace charge_outbox::util {

// gethostname(), or `fallback` when it fails.
std::string HostName(std::string_view fallback);

// HostName(fallback) + "-" + the process id: unique among the replicas and restarts on one machine.
std::string HostAndProcess(std::string_view fallback);

}  // namespace charge_outbox::util
