// Digests, proofs and random bytes through libsodium (digest.h).
#include "base/digest.h"

#include <vector>

#include <sodium.h>

namespace tfboot {

std::string to_hex(const unsigned char* bytes, std::size_t size) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string text;
  text.reserve(size * 2);
  for (std::size_t i = 0; i < size; ++i) {
    text += digits[bytes[i] >> 4];
    text += digits[bytes[i] & 15];
  }
  return text;
}

std::string sha256_hex(std::string_view text) {
  unsigned char digest[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(digest, reinterpret_cast<const unsigned char*>(text.data()), text.size());
  return to_hex(digest, sizeof digest);
}

std::string hmac_hex(std::string_view secret, std::string_view text) {
  // The init/update/final form takes a key of any length (a longer one is hashed first, as
  // RFC 2104 says); crypto_auth_hmacsha256() itself wants exactly 32 bytes.
  crypto_auth_hmacsha256_state state;
  crypto_auth_hmacsha256_init(&state, reinterpret_cast<const unsigned char*>(secret.data()), secret.size());
  crypto_auth_hmacsha256_update(&state, reinterpret_cast<const unsigned char*>(text.data()), text.size());
  unsigned char digest[crypto_auth_hmacsha256_BYTES];
  crypto_auth_hmacsha256_final(&state, digest);  // also wipes the state, which held the key's pads
  return to_hex(digest, sizeof digest);
}

bool same_proof(std::string_view expected, std::string_view received) {
  if (expected.empty() || expected.size() != received.size()) return false;
  return sodium_memcmp(expected.data(), received.data(), expected.size()) == 0;
}

Result<std::string> random_hex(std::size_t count) {
  // libsodium wants sodium_init() before use: it chooses the randomness source, after which
  // randombytes_buf is thread-safe. The static runs it once; it fails only on its own lock.
  static const bool sodium_ready = sodium_init() >= 0;
  if (!sodium_ready) return make_error(1, "libsodium failed to initialise; no random bytes");
  std::vector<unsigned char> bytes(count);
  randombytes_buf(bytes.data(), bytes.size());
  return to_hex(bytes.data(), bytes.size());
}

}  // namespace tfboot
