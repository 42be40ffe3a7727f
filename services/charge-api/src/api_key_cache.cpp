#include "api_key_cache.hpp"

#include <boost/asio/cancellation_state.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <cctype>
#include <functional>
#include <vector>

#include "charge_outbox/util/sha256.hpp"

namespace charge_outbox::charge_api {
namespace {

namespace asio = boost::asio;

// A follower re-checks its flight this often even if its wake-up was lost: a bound on a rare race, not
// the normal path (the leader wakes every follower when its query ends).
constexpr std::chrono::milliseconds kFollowerRecheck{100};

}  // namespace

// One database lookup in progress, and the coroutines waiting for its answer.
struct ApiKeyCache::Flight {
  std::optional<db::DbResult<Answer>> result;  // under the cache's mutex
  std::vector<std::function<void()>> wakers;
};

ApiKeyCache::ApiKeyCache(merchants::Authenticator& store, ChargeApiProbe& probe, ApiKeyCacheOptions options, Clock clock)
    : store_(store),
      probe_(probe),
      options_(options),
      clock_(std::move(clock)),
      valid_(options.valid_entries),
      unknown_(options.unknown_entries) {}

ApiKeyCache::~ApiKeyCache() = default;

std::optional<ApiKeyCache::Answer> ApiKeyCache::Recall(const std::string& api_key) {
  const auto hash = util::Sha256Hex(api_key);
  const auto now = clock_();
  std::lock_guard lock(mutex_);
  // An expired valid entry stays (LookupIsFree asks for it) until its lookup replaces it or the LRU
  // pushes it out.
  if (auto* entry = valid_.Find(hash); entry != nullptr && entry->expires > now) return entry->merchant;
  if (auto* expires = unknown_.Find(hash)) {
    if (*expires > now) return Answer{};
    unknown_.Erase(hash);
  }
  return std::nullopt;
}

bool ApiKeyCache::LookupIsFree(const std::string& api_key) {
  const auto hash = util::Sha256Hex(api_key);
  std::lock_guard lock(mutex_);
  return valid_.Find(hash) != nullptr || flights_.contains(hash);
}

void ApiKeyCache::Remember(const std::string& hash, const Answer& answer) {
  const auto expires = clock_() + options_.ttl;
  if (answer) {
    unknown_.Erase(hash);
    valid_.Put(hash, Entry{answer, expires});
  } else {
    valid_.Erase(hash);
    unknown_.Put(hash, expires);
  }
  probe_.SetAuthCacheEntries(valid_.size(), unknown_.size());
}

asio::awaitable<db::DbResult<ApiKeyCache::Answer>> ApiKeyCache::Lookup(const std::string& api_key) {
  const auto hash = util::Sha256Hex(api_key);
  std::shared_ptr<Flight> flight;
  bool leader = false;
  {
    std::lock_guard lock(mutex_);
    auto& slot = flights_[hash];
    if (!slot) {
      slot = std::make_shared<Flight>();
      leader = true;
    }
    flight = slot;
  }

  if (leader) {
    std::optional<db::DbResult<Answer>> found;
    std::exception_ptr failure;
    try {
      found = co_await store_.Authenticate(api_key);
    } catch (...) {
      failure = std::current_exception();  // cancelled: the followers must not wait for nothing
    }
    std::vector<std::function<void()>> wakers;
    {
      std::lock_guard lock(mutex_);
      if (found && *found) Remember(hash, **found);
      flight->result = found ? *found : db::DbResult<Answer>(db::DbError{db::DbErrc::kUnavailable, "lookup cancelled"});
      wakers.swap(flight->wakers);
      flights_.erase(hash);
    }
    for (auto& wake : wakers) wake();
    probe_.OnAuthLookup(!found || !*found ? "error" : **found ? "found" : "unknown");
    if (failure) std::rethrow_exception(failure);
    co_return *found;
  }

  const auto executor = co_await asio::this_coro::executor;
  auto timer = std::make_shared<asio::steady_timer>(executor);
  for (;;) {
    {
      std::lock_guard lock(mutex_);
      if (flight->result) {
        auto result = *flight->result;
        co_return result;
      }
      flight->wakers.emplace_back([executor, timer] { asio::post(executor, [timer] { timer->cancel(); }); });
    }
    timer->expires_after(kFollowerRecheck);
    boost::system::error_code ec;
    co_await timer->async_wait(asio::redirect_error(asio::use_awaitable, ec));
    const auto cancelled = (co_await asio::this_coro::cancellation_state).cancelled();
    if (cancelled != asio::cancellation_type::none) throw boost::system::system_error(asio::error::operation_aborted);
  }
}

asio::awaitable<db::DbResult<ApiKeyCache::Answer>> ApiKeyCache::Authenticate(const std::string& api_key) {
  if (auto remembered = Recall(api_key)) co_return *remembered;
  auto found = co_await Lookup(api_key);
  co_return found;
}

BearerCredentials ReadBearer(std::optional<std::string_view> authorization) {
  using Form = BearerCredentials::Form;
  auto header = authorization.value_or("");
  while (!header.empty() && header.front() == ' ') header.remove_prefix(1);
  while (!header.empty() && header.back() == ' ') header.remove_suffix(1);
  if (header.empty()) return {Form::kMissing, {}};
  constexpr std::string_view kScheme = "bearer";
  const auto scheme = header.substr(0, header.find(' '));
  if (scheme.size() != kScheme.size() ||
      !std::equal(scheme.begin(), scheme.end(), kScheme.begin(),
                  [](char a, char b) { return std::tolower(static_cast<unsigned char>(a)) == b; })) {
    return {Form::kOtherScheme, {}};
  }
  auto key = header.substr(scheme.size());
  while (!key.empty() && key.front() == ' ') key.remove_prefix(1);
  if (key.empty() || key.size() > 256) return {Form::kMalformedKey, {}};
  if (!std::all_of(key.begin(), key.end(), [](char c) { return c > 0x20 && c < 0x7f; })) {
    return {Form::kMalformedKey, {}};
  }
  return {Form::kKey, std::string(key)};
}

std::optional<std::string> BearerKey(std::string_view authorization) {
  auto read = ReadBearer(authorization);
  if (read.form != BearerCredentials::Form::kKey) return std::nullopt;
  return std::move(read.key);
}

}  // namespace charge_outbox::charge_api
