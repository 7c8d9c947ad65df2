// The per-task log dir and its files, written atomically (SPEC §7).
#include "files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace tfboot {
namespace {

std::unexpected<Error> file_error(const std::string& what, const std::string& path, int error_number) {
  return make_error(exit_code::file_write, "cannot " + what + " '" + path + "': " + std::strerror(error_number));
}

}  // namespace

std::optional<std::string> read_text_file(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode)) return std::nullopt;  // a directory opens fine but reads nothing
  std::ifstream stream(path, std::ios::binary);
  if (!stream) return std::nullopt;
  std::ostringstream content;
  content << stream.rdbuf();
  return content.str();
}

Result<void> make_directories(const std::string& path) {
  if (path.empty()) return make_error(exit_code::file_write, "cannot create an empty log directory path");
  std::string partial;
  std::size_t position = 0;
  while (position != std::string::npos) {
    position = path.find('/', position + 1);
    partial = path.substr(0, position);
    if (partial.empty() || partial == "/") continue;
    // An existing ancestor may be one we cannot write to (mkdir would say EACCES, not EEXIST).
    struct stat existing {};
    if (::stat(partial.c_str(), &existing) == 0 && S_ISDIR(existing.st_mode)) continue;
    if (::mkdir(partial.c_str(), 0755) == 0 || errno == EEXIST) continue;
    return file_error("create directory", partial, errno);
  }
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return file_error("create directory", path, errno);
  if (!S_ISDIR(info.st_mode)) return file_error("use as a directory", path, ENOTDIR);
  return {};
}

Result<void> write_file_atomically(const std::string& path, const std::string& content) {
  auto slash = path.rfind('/');
  std::string directory = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  std::string temporary = directory + "." + base + ".tmp." + std::to_string(::getpid());

  int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return file_error("write", temporary, errno);
  const char* data = content.data();
  std::size_t left = content.size();
  while (left > 0) {
    ssize_t written = ::write(fd, data, left);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) {
      int saved = written < 0 ? errno : ENOSPC;
      ::close(fd);
      ::unlink(temporary.c_str());
      return file_error("write", temporary, saved);
    }
    data += written;
    left -= static_cast<std::size_t>(written);
  }
  int flushed = ::fsync(fd) == 0 ? 0 : errno;
  if (::close(fd) != 0 && flushed == 0) flushed = errno;
  if (flushed != 0) {
    int saved = flushed;
    ::unlink(temporary.c_str());
    return file_error("flush", temporary, saved);
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    int saved = errno;
    ::unlink(temporary.c_str());
    return file_error("rename to", path, saved);
  }
  return {};
}

}  // namespace tfboot
