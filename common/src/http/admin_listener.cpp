#include "charge_outbox/http/admin_listener.hpp"

#include <chrono>
#include <cstdint>

namespace charge_outbox::http {

ServerOptions LoadAdminServerOptions(config::ConfigReader& r) {
  using std::chrono::milliseconds;
  using std::chrono::seconds;
  ServerOptions admin;
  admin.address = r.String("admin.address", "0.0.0.0");
  admin.port = static_cast<std::uint16_t>(r.Integer("admin.port", 9090, 0, 65535));
  admin.threads = 1;
  admin.body_limit = 1024;  // nothing on the admin port takes a body
  admin.max_connections = static_cast<std::size_t>(r.Integer("admin.max_connections", 256, 2, 100'000));
  // A scrape and the kubelet's probes each need one or two at a time; an address holding more is a flood.
  admin.max_connections_per_client =
      static_cast<std::size_t>(r.Integer("admin.max_connections_per_client", 8, 0, 100'000));
  admin.reserved_for_new_clients =
      static_cast<std::size_t>(r.Integer("admin.reserved_connections", 32, 0, 100'000));
  if (admin.reserved_for_new_clients >= admin.max_connections) {
    throw config::ConfigError("admin.reserved_connections",
                              "must be less than admin.max_connections, or no client could hold two connections");
  }
  // The kubelet's probe and Prometheus's scrape send their request as soon as they connect.
  admin.idle_timeout = r.Duration("admin.idle_timeout", seconds{5}, milliseconds{100}, std::chrono::minutes{10});
  admin.read_timeout = r.Duration("admin.read_timeout", seconds{5}, milliseconds{100}, std::chrono::minutes{10});
  return admin;
}

}  // namespace charge_outbox::http
