// Private to the acquirer client: the parsed acquirer base URL.
#pragma once

#include <string>

namespace charge_outbox::acquirer::detail {

struct Origin {
  bool tls = false;
  std::string host;         // for DNS and certificate checks: no brackets around an IPv6 address
  std::string port;         // always set: 80 or 443 when the URL has none
  std::string host_header;  // the Host header: host[:port] as written in the URL
  std::string base_path;    // percent-encoded, no trailing slash ("" or "/prefix")
  bool host_is_ip = false;
};

// Throws config::ConfigError("acquirer.url", ...) for anything but http(s)://host[:port][/path].
Origin ParseOrigin(const std::string& url);

}  // namespace charge_outbox::acquirer::detail
