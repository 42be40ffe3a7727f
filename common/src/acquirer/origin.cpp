#include "origin.hpp"

#include <boost/url/parse.hpp>
#include <boost/url/url_view.hpp>

#include "charge_outbox/config/config.hpp"

namespace charge_outbox::acquirer::detail {

namespace urls = boost::urls;

Origin ParseOrigin(const std::string& url) {
  constexpr const char* kKey = "acquirer.url";
  const auto parsed = urls::parse_absolute_uri(url);
  if (!parsed) {
    throw config::ConfigError(kKey, "\"" + url + "\" is not an absolute URL; use http://host:port or https://host");
  }
  const urls::url_view u = *parsed;
  Origin origin;
  if (u.scheme() == "https") {
    origin.tls = true;
  } else if (u.scheme() != "http") {
    throw config::ConfigError(kKey, "scheme must be http or https, got \"" + std::string(u.scheme()) + "\"");
  }
  if (u.has_userinfo()) {
    throw config::ConfigError(kKey, "must not carry credentials; set ACQUIRER_API_KEY instead");
  }
  if (u.has_query() || u.has_fragment()) {
    throw config::ConfigError(kKey, "must not have a query or fragment; give only scheme, host, port and path");
  }
  switch (u.host_type()) {
    case urls::host_type::name:
      break;
    case urls::host_type::ipv4:
    case urls::host_type::ipv6:
      origin.host_is_ip = true;
      break;
    case urls::host_type::ipvfuture:
    case urls::host_type::none:
      throw config::ConfigError(kKey, "needs a host name or an IP address");
  }
  origin.host = u.host_address();
  if (origin.host.empty()) throw config::ConfigError(kKey, "needs a host name or an IP address");
  if (u.has_port()) {
    if (u.port_number() == 0) throw config::ConfigError(kKey, "port must be between 1 and 65535");
    origin.port = std::to_string(u.port_number());
  } else {
    origin.port = origin.tls ? "443" : "80";
  }
  origin.host_header = std::string(u.encoded_host_and_port());
  origin.base_path = std::string(u.encoded_path());
  while (!origin.base_path.empty() && origin.base_path.back() == '/') origin.base_path.pop_back();
  return origin;
}

}  // namespace charge_outbox::acquirer::detail
