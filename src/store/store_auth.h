// Store authentication: the keyed hash with which a TcpStore client and its
// server prove to each other that they hold the job secret
// (CHORUS_STORE_SECRET), and the random bytes of their challenges. The secret
// itself never crosses the wire: each side sends HMAC-SHA256(secret, label |
// server nonce | client nonce), fresh nonces make every proof single-use, and
// proofs are compared in constant time. HMAC-SHA256 is OpenSSL's libcrypto.
//
//   const Mac proof = hmac_sha256(secret, message);
//   if (!equal_in_constant_time(proof, received)) refuse();
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace chorus {

inline constexpr size_t kMacBytes = 32;    // HMAC-SHA256
inline constexpr size_t kNonceBytes = 32;  // 256 random bits: never repeats
using Mac = std::array<uint8_t, kMacBytes>;
using Nonce = std::array<uint8_t, kNonceBytes>;

// HMAC-SHA256 of `message` under `key` (RFC 2104; any key length).
Mac hmac_sha256(std::string_view key, std::span<const uint8_t> message);

// a == b, in a time that does not depend on where they differ.
bool equal_in_constant_time(const Mac& a, const Mac& b);

// Bytes from the kernel's random source (getrandom); throws Error(system).
void random_bytes(std::span<uint8_t> out);
Nonce random_nonce();

// A fresh job secret: 32 random bytes as 64 hex digits (what chorus-run
// gives its ranks).
std::string random_secret();

}  // namespace chorus
