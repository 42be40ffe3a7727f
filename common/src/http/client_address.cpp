#include "charge_outbox/http/client_address.hpp"

#include <boost/asio/ip/address_v4.hpp>
#include <boost/asio/ip/address_v6.hpp>

#include <algorithm>
#include <charconv>

namespace charge_outbox::http {
namespace {

namespace asio = boost::asio;

std::string_view Trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

// An IPv4-mapped IPv6 address as the IPv4 address it maps, so that both spellings of a client count alike.
asio::ip::address Unmapped(const asio::ip::address& address) {
  if (address.is_v6() && address.to_v6().is_v4_mapped()) {
    return asio::ip::make_address_v4(asio::ip::v4_mapped, address.to_v6());
  }
  return address;
}

// A bare IPv4 or IPv6 address, or an IPv6 one in brackets; nothing else (no port, no zone, no name).
std::optional<asio::ip::address> ParseAddress(std::string_view text) {
  text = Trim(text);
  if (text.size() > 2 && text.front() == '[' && text.back() == ']') text = text.substr(1, text.size() - 2);
  if (text.empty() || text.size() > 45 || text.find('%') != std::string_view::npos) return std::nullopt;
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(std::string(text), ec);
  if (ec) return std::nullopt;
  return Unmapped(address);
}

template <typename Bytes>
Bytes Masked(Bytes bytes, unsigned prefix_length) {
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const unsigned from = static_cast<unsigned>(i) * 8;
    if (prefix_length >= from + 8) continue;
    const unsigned keep = prefix_length > from ? prefix_length - from : 0;
    bytes[i] = static_cast<unsigned char>(keep == 0 ? 0 : bytes[i] & (0xFFu << (8 - keep)));
  }
  return bytes;
}

asio::ip::address Masked(const asio::ip::address& address, unsigned prefix_length) {
  if (address.is_v4()) return asio::ip::address_v4(Masked(address.to_v4().to_bytes(), prefix_length));
  return asio::ip::address_v6(Masked(address.to_v6().to_bytes(), prefix_length));
}

}  // namespace

bool Cidr::Contains(const asio::ip::address& address) const {
  const auto candidate = Unmapped(address);
  if (candidate.is_v4() != network.is_v4()) return false;
  return Masked(candidate, prefix_length) == network;
}

std::optional<Cidr> ParseCidr(std::string_view text) {
  text = Trim(text);
  const auto slash = text.find('/');
  const auto address = ParseAddress(text.substr(0, slash));
  if (!address || text.substr(0, slash).find('[') != std::string_view::npos) return std::nullopt;
  const unsigned max_length = address->is_v4() ? 32 : 128;
  unsigned prefix_length = max_length;
  if (slash != std::string_view::npos) {
    const auto digits = text.substr(slash + 1);
    const auto* end = digits.data() + digits.size();
    const auto [stop, ec] = std::from_chars(digits.data(), end, prefix_length);
    if (digits.empty() || ec != std::errc{} || stop != end || prefix_length > max_length) return std::nullopt;
  }
  return Cidr{Masked(*address, prefix_length), prefix_length};
}

TrustedProxies::TrustedProxies(std::vector<Cidr> blocks) : blocks_(std::move(blocks)) {}

std::optional<TrustedProxies> TrustedProxies::Parse(std::string_view text, std::string* bad_entry) {
  std::vector<Cidr> blocks;
  if (Trim(text).empty()) return TrustedProxies{};
  for (;;) {
    const auto comma = text.find(',');
    const auto entry = Trim(text.substr(0, comma));
    const auto block = ParseCidr(entry);
    if (!block) {  // an empty entry too: ",," is a typo, not "nothing"
      if (bad_entry != nullptr) *bad_entry = std::string(entry);
      return std::nullopt;
    }
    blocks.push_back(*block);
    if (comma == std::string_view::npos) return TrustedProxies(std::move(blocks));
    text = text.substr(comma + 1);
  }
}

bool TrustedProxies::Contains(const asio::ip::address& address) const {
  return std::any_of(blocks_.begin(), blocks_.end(), [&](const Cidr& block) { return block.Contains(address); });
}

asio::ip::address ClientAddress(const asio::ip::address& peer, const boost::beast::http::fields& headers,
                                const TrustedProxies& trusted) {
  auto believed = Unmapped(peer);
  if (trusted.empty() || !trusted.Contains(believed)) return believed;
  // Every X-Forwarded-For field, in order: together they are one comma-separated list (RFC 9110 5.3).
  std::vector<std::string_view> fields;
  for (auto [at, end] = headers.equal_range("X-Forwarded-For"); at != end; ++at) {
    fields.emplace_back(at->value().data(), at->value().size());
  }
  std::size_t walked = 0;
  for (auto field = fields.rbegin(); field != fields.rend(); ++field) {
    std::string_view rest = *field;
    for (;;) {
      const auto comma = rest.rfind(',');
      const auto hop_text = comma == std::string_view::npos ? rest : rest.substr(comma + 1);
      if (++walked > kMaxForwardedHops) return believed;
      const auto hop = ParseAddress(hop_text);
      if (!hop) return believed;
      believed = *hop;
      if (!trusted.Contains(believed)) return believed;
      if (comma == std::string_view::npos) break;
      rest = rest.substr(0, comma);
    }
  }
  // Every hop was a trusted proxy: the request began at the leftmost one.
  return believed;
}

InFlightLimit::Slot::~Slot() {
  if (limit_ != nullptr) limit_->Leave(client_);
}

std::optional<InFlightLimit::Slot> InFlightLimit::Enter(const std::string& client) {
  if (per_client_ == 0) return Slot{};
  std::lock_guard lock(mutex_);
  auto& count = in_flight_[client];
  if (count >= per_client_) return std::nullopt;
  ++count;
  return Slot{this, client};
}

std::size_t InFlightLimit::InFlight(const std::string& client) const {
  std::lock_guard lock(mutex_);
  const auto found = in_flight_.find(client);
  return found == in_flight_.end() ? 0 : found->second;
}

void InFlightLimit::Leave(const std::string& client) {
  std::lock_guard lock(mutex_);
  const auto found = in_flight_.find(client);
  if (found != in_flight_.end() && --found->second == 0) in_flight_.erase(found);
}

}  // namespace charge_outbox::http
