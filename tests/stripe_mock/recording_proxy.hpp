// RecordingProxy: an HTTP/1.1 proxy on loopback between the Stripe adapter and stripe-mock that keeps every
// exchange (what the adapter sent, what stripe-mock answered), so a test can say which requests reached
// stripe-mock and what stripe-mock made of each. Every request goes to stripe-mock and is checked there.
//
// stripe-mock is stateless: its search always finds one PaymentIntent and its events are never ours, so the
// adapter's later lookup routes (events, then the PaymentIntent by id) can only be reached if a test answers
// in stripe-mock's place. A Substitute may do that, and only for a request stripe-mock accepted (2xx): a
// refusal always reaches the adapter as stripe-mock gave it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace charge_outbox::testing {

struct ProxiedExchange {
  std::string method;
  std::string target;  // path and query, as the adapter sent them
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  int status = 0;           // stripe-mock's
  std::string answer;       // stripe-mock's body: its error message when it refused the request
  bool substituted = false;  // the adapter got the Substitute's body instead of `answer`

  // The value of header `name` (case-insensitive), if sent.
  std::optional<std::string> Header(const std::string& name) const;
};

// Returns a body to answer with instead of stripe-mock's (accepted) one, or nullopt to pass it on.
using Substitute = std::function<std::optional<std::string>(const ProxiedExchange&)>;

// Runs on a thread of its own; exchanges() is thread-safe.
class RecordingProxy {
 public:
  RecordingProxy(std::uint16_t upstream_port, Substitute substitute = {});
  ~RecordingProxy();
  RecordingProxy(const RecordingProxy&) = delete;
  RecordingProxy& operator=(const RecordingProxy&) = delete;

  std::uint16_t port() const;
  std::vector<ProxiedExchange> exchanges() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace charge_outbox::testing
