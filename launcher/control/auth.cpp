// The control channel's shared secret, job id, nonces and HMAC proofs.
#include "control/auth.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <nlohmann/json.hpp>
#include <sodium.h>

namespace tfboot {
namespace {

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

// Reads at most `limit` + 1 bytes, so that an oversized file (or /dev/zero) is noticed, not read.
Result<std::string> read_bounded(const Setting& path, std::size_t limit) {
  int fd = ::open(path.value.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return usage_error(path.source + ": cannot read '" + path.value + "': " + std::strerror(errno));
  std::string content;
  char buffer[1024];
  while (content.size() <= limit) {
    ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      int saved = errno;
      ::close(fd);
      return usage_error(path.source + ": cannot read '" + path.value + "': " + std::strerror(saved));
    }
    if (got == 0) break;
    content.append(buffer, static_cast<std::size_t>(got));
  }
  ::close(fd);  // read-only: a failing close loses nothing
  return content;
}

}  // namespace

Result<std::string> read_control_secret(const Setting& path) {
  auto content = read_bounded(path, max_secret_size);
  if (!content) return content;
  if (content->size() > max_secret_size) {
    return usage_error(path.source + ": '" + path.value + "' is over " + std::to_string(max_secret_size) +
                       " bytes; expected a shared secret");
  }
  // Secrets written with `echo` or an editor end with a newline that the other side may lack.
  while (!content->empty() && (content->back() == '\n' || content->back() == '\r')) content->pop_back();
  if (content->empty()) return usage_error(path.source + ": '" + path.value + "' is empty; expected a shared secret");
  return content;
}

std::string job_id_of_cluster(std::string_view cluster_json) {
  unsigned char digest[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(digest, reinterpret_cast<const unsigned char*>(cluster_json.data()), cluster_json.size());
  return to_hex(digest, sizeof digest).substr(0, 16);
}

std::string job_id(const TfConfig& config) {
  // Taken from to_json's own output so that the text hashed is the one tfboot writes.
  const std::string text = to_json(config);
  auto root = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.contains("cluster")) return job_id_of_cluster(text);
  return job_id_of_cluster(root["cluster"].dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

Result<std::string> make_nonce() {
  // libsodium wants sodium_init() before use: it chooses the randomness source, after which
  // randombytes_buf is thread-safe. The static runs it once; it fails only on its own lock.
  static const bool sodium_ready = sodium_init() >= 0;
  if (!sodium_ready) return make_error(1, "libsodium failed to initialise; no random bytes for the control channel's nonce");
  unsigned char bytes[16];
  randombytes_buf(bytes, sizeof bytes);
  return to_hex(bytes, sizeof bytes);
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

}  // namespace tfboot
