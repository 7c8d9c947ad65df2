// The termination message, written where Kubernetes reads it.
#include "observe/termination_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/files.h"
#include "base/unique_fd.h"

namespace tfboot {

std::optional<std::string> termination_log_path(const std::optional<Setting>& given) {
  if (given) return given->value;
  const std::string path(default_termination_log);
  if (::access(path.c_str(), W_OK) == 0) return path;
  return std::nullopt;
}

std::string termination_message(std::string_view reason) {
  std::size_t size = std::min(reason.size(), max_termination_message - 1);
  // Back to the start of a UTF-8 character: a continuation byte is 10xxxxxx.
  if (size < reason.size()) {
    while (size > 0 && (static_cast<unsigned char>(reason[size]) & 0xC0) == 0x80) --size;
  }
  return std::string(reason.substr(0, size)) + "\n";
}

Result<void> write_termination_message(const std::string& path, std::string_view reason) {
  const std::string message = termination_message(reason);
  auto renamed = write_file_atomically(path, message);
  if (renamed) return {};
  // In place: only into a regular file, opened without blocking and without following a link.
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY));
  if (!fd) return std::unexpected(renamed.error());
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0 || !S_ISREG(info.st_mode)) return make_error(exit_code::file_write, path + " is not a regular file");
  if (::ftruncate(fd.get(), 0) != 0) return errno_error(exit_code::file_write, "truncate " + path, errno);
  if (int failed = write_all(fd.get(), message); failed != 0) return errno_error(exit_code::file_write, "write " + path, failed);
  return {};
}

}  // namespace tfboot
