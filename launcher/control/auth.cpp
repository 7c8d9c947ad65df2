// The control channel's shared secret, job id and nonces.
#include "control/auth.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <nlohmann/json.hpp>

#include "base/digest.h"
#include "base/unique_fd.h"

namespace tfboot {
namespace {

// Reads at most `limit` + 1 bytes, so that an oversized file (or /dev/zero) is noticed, not read.
// Opened non-blocking and refused when it is a FIFO or a socket: reading one could wait for a
// writer for ever, before any deadline applies.
Result<std::string> read_bounded(const Setting& path, std::size_t limit) {
  UniqueFd fd(::open(path.value.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!fd) return usage_error(path.source + ": cannot read '" + path.value + "': " + std::strerror(errno));
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) return usage_error(path.source + ": cannot read '" + path.value + "': " + std::strerror(errno));
  if (S_ISFIFO(info.st_mode) || S_ISSOCK(info.st_mode)) {
    return usage_error(path.source + ": '" + path.value + "' is a FIFO or socket, not a file; expected a shared secret");
  }
  std::string content;
  char buffer[1024];
  while (content.size() <= limit) {
    ssize_t got = ::read(fd.get(), buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return usage_error(path.source + ": cannot read '" + path.value + "': " + std::strerror(errno));
    if (got == 0) break;
    content.append(buffer, static_cast<std::size_t>(got));
  }
  return content;  // read-only: a failing close loses nothing
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

std::string job_id_of_cluster(std::string_view cluster_json) { return sha256_hex(cluster_json).substr(0, 16); }

std::string job_id(const TfConfig& config) { return job_id_of_tf_config(to_json(config)); }

std::string job_id_of_tf_config(const std::string& text) {
  // In the order tfboot writes the cluster (chief, worker, ps, evaluator), not sorted.
  auto root = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.contains("cluster")) return job_id_of_cluster(text);
  return job_id_of_cluster(root["cluster"].dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

Result<std::string> make_nonce() {
  auto nonce = random_hex(16);
  if (!nonce) return make_error(1, "libsodium failed to initialise; no random bytes for the control channel's nonce");
  return nonce;
}

}  // namespace tfboot
