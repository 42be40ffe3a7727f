#include "api_keys.hpp"

#include <openssl/rand.h>

#include <array>
#include <stdexcept>

#include "charge_outbox/util/sha256.hpp"

namespace charge_outbox::charge_admin {
namespace {

constexpr std::string_view kAlphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
constexpr std::size_t kRandomCharacters = 43;  // 43 × log2(62) ≈ 256 bits

}  // namespace

merchants::NewKey StoredForm(const std::string& key) {
  return {util::Sha256(key), key.substr(0, kKeyPrefixLength)};
}

DrawnKey DrawApiKey() {
  std::string key = "sk_";
  std::array<unsigned char, 64> bytes{};
  while (key.size() < 3 + kRandomCharacters) {
    if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1) {
      throw std::runtime_error("the system's random generator failed; no key was made");
    }
    // Rejection sampling: 248 = 4 × 62, so every character is equally likely.
    for (const unsigned char b : bytes) {
      if (b < 248 && key.size() < 3 + kRandomCharacters) key += kAlphabet[b % 62];
    }
  }
  return {key, StoredForm(key)};
}

}  // namespace charge_outbox::charge_admin
