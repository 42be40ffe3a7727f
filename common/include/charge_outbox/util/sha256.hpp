// SHA-256 digests, for migration checksums, API key hashes and request fingerprints.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace charge_outbox::util {

using Sha256Digest = std::array<std::uint8_t, 32>;

Sha256Digest Sha256(std::string_view data);
std::string Sha256Hex(std::string_view data);
std::string ToHex(const std::uint8_t* data, std::size_t size);

}  // namespace charge_outbox::util
