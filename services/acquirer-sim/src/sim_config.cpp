#include "sim_config.hpp"

#include <boost/asio/ip/address.hpp>

#include "charge_outbox/log/log.hpp"

namespace charge_outbox::acquirer_sim {
namespace {

// "a, b" -> {"a", "b"}; an empty item stays, so that the caller can refuse it.
std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> items;
  std::size_t start = 0;
  while (start <= text.size()) {
    auto end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    auto item = text.substr(start, end - start);
    const auto first = item.find_first_not_of(" \t");
    const auto last = item.find_last_not_of(" \t");
    items.push_back(first == std::string::npos ? std::string{} : item.substr(first, last - first + 1));
    start = end + 1;
  }
  return items;
}

}  // namespace

SimConfig LoadConfig(config::ConfigReader& reader) {
  using std::chrono::milliseconds;
  SimConfig c;
  // server.* was this daemon's own spelling; every daemon now says http.*.
  for (const char* name : {"address", "port", "threads", "body_limit", "read_timeout", "idle_timeout", "max_connections"}) {
    reader.Renamed(std::string("server.") + name, std::string("http.") + name);
  }
  c.http.address = reader.String("http.address", "127.0.0.1");
  boost::system::error_code address_error;
  boost::asio::ip::make_address(c.http.address, address_error);
  if (address_error) {
    throw config::ConfigError("http.address", "expected an IP address such as 127.0.0.1 or 0.0.0.0, got \"" +
                                                  c.http.address + "\"");
  }
  c.http.port = static_cast<std::uint16_t>(reader.Integer("http.port", 8090, 0, 65535));
  c.http.threads = static_cast<std::size_t>(reader.Integer("http.threads", 1, 1, 64));
  c.http.body_limit = static_cast<std::size_t>(reader.Integer("http.body_limit", 16 * 1024, 256, 1 << 20));
  c.http.read_timeout = reader.Duration("http.read_timeout", std::chrono::seconds{10}, milliseconds{1});
  c.http.idle_timeout = reader.Duration("http.idle_timeout", std::chrono::seconds{60}, milliseconds{1});
  c.http.max_connections = static_cast<std::size_t>(reader.Integer("http.max_connections", 10'000, 1, 1'000'000));
  c.data_dir = reader.String("data.dir");
  for (auto& key : SplitList(reader.Secret("auth.api_keys"))) {
    if (key.empty()) {
      throw config::ConfigError("auth.api_keys", "an empty key in the list; set AUTH_API_KEYS to keys separated by commas");
    }
    c.api_keys.push_back(std::move(key));
  }
  c.faults = LoadFaultProfile(reader);
  c.stripe.search_rate_limit = reader.Integer("stripe.search_rate_limit", 20, 1, 100'000);
  c.stripe.idempotency_key_retention =
      reader.Duration("stripe.idempotency_key_retention", std::chrono::hours{24}, milliseconds{1});
  c.shutdown_deadline = reader.Duration("shutdown.deadline", std::chrono::seconds{10}, milliseconds{100});
  c.log_level = reader.Choice("log.level", "info", {std::begin(log::kLevels), std::end(log::kLevels)});
  reader.RejectUnknownKeys();
  reader.RejectUnknownEnvironment({"faults"});
  return c;
}

}  // namespace charge_outbox::acquirer_sim
