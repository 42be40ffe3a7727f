// charge-admin's merchant and key commands: a fresh install's first merchant and key, and a key's life
// (issue, rotate with an overlap, revoke). Each change lands with its audit row or not at all; a key is
// printed once, to stdout, and never stored or logged.
#pragma once

#include <boost/asio/awaitable.hpp>

#include <functional>
#include <ostream>

#include "api_keys.hpp"
#include "charge_outbox/merchants/merchant_store.hpp"
#include "command_line.hpp"

namespace charge_outbox::charge_admin {

struct MerchantTools {
  merchants::MerchantStore& merchants;
  std::function<DrawnKey()> draw_key;
  std::ostream& out;
  std::ostream& err;
};

// Exit status as RunCommand's: 0 done (or already so), 1 refused or failed with nothing changed.
boost::asio::awaitable<int> AddMerchant(MerchantTools tools, const CommandLine& command);
boost::asio::awaitable<int> ListMerchants(MerchantTools tools, const CommandLine& command);
// key issue and key rotate: a key is drawn (again if its prefix is taken) and printed once.
boost::asio::awaitable<int> NewKey(MerchantTools tools, const CommandLine& command);
boost::asio::awaitable<int> ListKeys(MerchantTools tools, const CommandLine& command);
boost::asio::awaitable<int> RevokeKey(MerchantTools tools, const CommandLine& command);

}  // namespace charge_outbox::charge_admin
