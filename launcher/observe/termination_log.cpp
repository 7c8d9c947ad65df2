// The termination message, written where Kubernetes reads it.
#include "observe/termination_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

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

namespace {

// Into what is at `path`, never replacing it: a regular file is truncated first (Kubernetes'
// bind mount), a FIFO or a character device (/dev/null, /dev/stderr's pipe) gets the message in
// one write (at most 4 KiB: atomic on a pipe). Opened without blocking: a FIFO with no reader is
// an error, not a hang. `follow`: through a symbolic link, to what the user pointed it at.
Result<void> write_in_place(const std::string& path, const std::string& message, bool follow) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY | (follow ? 0 : O_NOFOLLOW)));
  if (!fd) {
    if (errno == ENXIO) return make_error(exit_code::file_write, path + " is a FIFO that nobody reads");
    return errno_error(exit_code::file_write, "open " + path, errno);
  }
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) return errno_error(exit_code::file_write, "stat " + path, errno);
  if (S_ISREG(info.st_mode) && ::ftruncate(fd.get(), 0) != 0) return errno_error(exit_code::file_write, "truncate " + path, errno);
  if (!S_ISREG(info.st_mode) && !S_ISFIFO(info.st_mode) && !S_ISCHR(info.st_mode)) {
    return make_error(exit_code::file_write, path + " is not a regular file, a FIFO or a character device");
  }
  if (int failed = write_all(fd.get(), message); failed != 0) return errno_error(exit_code::file_write, "write " + path, failed);
  return {};
}

}  // namespace

Result<void> write_termination_message(const std::string& path, std::string_view reason) {
  const std::string message = termination_message(reason);
  struct stat link {};
  if (::lstat(path.c_str(), &link) == 0 && !S_ISREG(link.st_mode)) return write_in_place(path, message, true);
  auto renamed = write_file_atomically(path, message);
  if (renamed) return {};
  // A regular file a rename cannot replace (a bind mount): in place, not through a link planted since.
  auto in_place = write_in_place(path, message, false);
  if (!in_place) return std::unexpected(renamed.error());
  return {};
}

}  // namespace tfboot
