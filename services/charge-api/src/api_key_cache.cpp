#include "api_key_cache.hpp"

#include <algorithm>
#include <cctype>

#include "charge_outbox/util/sha256.hpp"

namespace charge_outbox::charge_api {

ApiKeyCache::ApiKeyCache(charges::ChargeStore& store, std::chrono::milliseconds ttl, std::size_t max_entries)
    : store_(store), ttl_(ttl), max_entries_(max_entries) {}

boost::asio::awaitable<db::DbResult<std::optional<charges::Merchant>>> ApiKeyCache::Authenticate(
    const std::string& api_key) {
  const auto hash = util::Sha256Hex(api_key);
  const auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(mutex_);
    if (const auto it = entries_.find(hash); it != entries_.end() && it->second.expires > now) {
      co_return it->second.merchant;
    }
  }
  auto found = co_await store_.Authenticate(api_key);
  if (found) {
    std::lock_guard lock(mutex_);
    // A flood of random keys must not grow memory without bound: start over when full.
    if (entries_.size() >= max_entries_) entries_.clear();
    entries_[hash] = Entry{*found, now + ttl_};
  }
  co_return found;
}

std::optional<std::string> BearerKey(std::string_view authorization) {
  constexpr std::string_view kScheme = "bearer ";
  if (authorization.size() <= kScheme.size()) return std::nullopt;
  for (std::size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(authorization[i])) != kScheme[i]) return std::nullopt;
  }
  auto key = authorization.substr(kScheme.size());
  while (!key.empty() && key.front() == ' ') key.remove_prefix(1);
  while (!key.empty() && key.back() == ' ') key.remove_suffix(1);
  if (key.empty() || key.size() > 256) return std::nullopt;
  if (!std::all_of(key.begin(), key.end(), [](char c) { return c > 0x20 && c < 0x7f; })) return std::nullopt;
  return std::string(key);
}

}  // namespace charge_outbox::charge_api
