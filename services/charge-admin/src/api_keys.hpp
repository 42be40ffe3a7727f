// A new merchant API key: 256 random bits as 43 base62 characters after "sk_", so it survives a
// double-click and any shell. Only its SHA-256 and its first 16 characters (the prefix that names it in
// lists, 77 random bits: unique in practice, never enough to use it) are stored.
#pragma once

#include <string>

#include "charge_outbox/merchants/merchant_store.hpp"

namespace charge_outbox::charge_admin {

struct DrawnKey {
  std::string key;  // shown once, to the person who asked; never stored or logged
  merchants::NewKey stored;
};

inline constexpr std::size_t kKeyPrefixLength = 16;

// From OpenSSL's CSPRNG. Throws std::runtime_error if it fails (it then has no entropy to give).
DrawnKey DrawApiKey();

// The stored form of a key (its hash and prefix).
merchants::NewKey StoredForm(const std::string& key);

}  // namespace charge_outbox::charge_admin
