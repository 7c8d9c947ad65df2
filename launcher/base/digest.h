// Digests, proofs and random bytes, through libsodium (no cryptography of our own): SHA-256 for
// the job id and the environment fingerprint, HMAC-SHA256 for the control channel's proofs.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "base/error.h"

namespace tfboot {

// Lowercase hex of `size` bytes.
std::string to_hex(const unsigned char* bytes, std::size_t size);

// SHA-256 of `text`, as 64 hex characters.
std::string sha256_hex(std::string_view text);

// HMAC-SHA256 of `text` under `secret`, as 64 hex characters.
std::string hmac_hex(std::string_view secret, std::string_view text);

// Compares in constant time, so that timing tells an attacker nothing about a proof.
bool same_proof(std::string_view expected, std::string_view received);

// `count` fresh random bytes as hex; an error only when libsodium cannot start. (With no
// randomness at all, neither getrandom(2) nor /dev/urandom, libsodium aborts the process.)
Result<std::string> random_hex(std::size_t count);

}  // namespace tfboot
