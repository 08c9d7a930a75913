#include "store/store_auth.h"

#include "core/check.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/random.h>

#include <cerrno>
#include <cstring>

namespace chorus {

Mac hmac_sha256(std::string_view key, std::span<const uint8_t> message) {
  Mac out{};
  unsigned int len = 0;
  // An empty key is a valid HMAC key; OpenSSL wants a non-null pointer for it.
  static constexpr uint8_t kNoKey = 0;
  const void* k = key.empty() ? static_cast<const void*>(&kNoKey) : key.data();
  if (::HMAC(EVP_sha256(), k, static_cast<int>(key.size()), message.data(), message.size(),
             out.data(), &len) == nullptr ||
      len != kMacBytes)
    fail(ErrorCode::internal, "HMAC-SHA256 failed");
  return out;
}

bool equal_in_constant_time(const Mac& a, const Mac& b) {
  return ::CRYPTO_memcmp(a.data(), b.data(), kMacBytes) == 0;
}

void random_bytes(std::span<uint8_t> out) {
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::getrandom(out.data() + done, out.size() - done, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(ErrorCode::system, "getrandom: ", std::strerror(errno));
    }
    done += static_cast<size_t>(n);
  }
}

Nonce random_nonce() {
  Nonce n{};
  random_bytes(n);
  return n;
}

std::string random_secret() {
  std::array<uint8_t, 32> raw{};
  random_bytes(raw);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  for (uint8_t b : raw) {
    s += kHex[b >> 4];
    s += kHex[b & 15];
  }
  return s;
}

}  // namespace chorus
