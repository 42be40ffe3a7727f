#include "charge_outbox/util/sha256.hpp"

#include <openssl/evp.h>

#include <stdexcept>

namespace charge_outbox::util {

Sha256Digest Sha256(std::string_view data) {
  Sha256Digest digest{};
  unsigned int size = 0;
  if (EVP_Digest(data.data(), data.size(), digest.data(), &size, EVP_sha256(), nullptr) != 1 ||
      size != digest.size()) {
    throw std::runtime_error("SHA-256 failed in OpenSSL");
  }
  return digest;
}

std::string ToHex(const std::uint8_t* data, std::size_t size) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(size * 2);
  for (std::size_t i = 0; i < size; ++i) {
    out += kHex[data[i] >> 4];
    out += kHex[data[i] & 0xF];
  }
  return out;
}

std::string Sha256Hex(std::string_view data) {
  const auto digest = Sha256(data);
  return ToHex(digest.data(), digest.size());
}

}  // namespace charge_outbox::util
