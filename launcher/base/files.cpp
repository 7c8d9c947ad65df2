// Files tfboot writes and reads: directories remembered for rollback, atomic writes through safe
// temporaries, bounded reads that never block.
#include "base/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "base/unique_fd.h"

namespace tfboot {
namespace {

std::unexpected<Error> file_error(const std::string& what, const std::string& path, int error_number) {
  return errno_error(exit_code::file_write, "cannot " + what + " '" + path + "'", error_number);
}

// A whole, flushed temporary beside `path`; its name, to be renamed or unlinked by the caller.
Result<std::string> write_temporary(const std::string& path, const std::string& content) {
  auto opened = open_temporary(path);
  if (!opened) return std::unexpected(opened.error());
  auto& [file, temporary] = *opened;
  int saved = write_all(file.get(), content);
  if (saved == 0 && ::fsync(file.get()) != 0) saved = errno;
  // close reports a write-back failure that write and fsync did not: it is checked too.
  if (::close(file.release()) != 0 && saved == 0) saved = errno;
  if (saved != 0) {
    ::unlink(temporary.c_str());
    return file_error("write", path, saved);
  }
  return temporary;
}

}  // namespace

Result<std::pair<UniqueFd, std::string>> open_temporary(const std::string& path) {
  auto slash = path.rfind('/');
  std::string directory = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  std::string temporary = directory + "." + base + ".tmp.XXXXXX";
  // mkostemp opens with O_CREAT|O_EXCL under a random name: a symlink or file planted at any
  // name we could pick is refused, never followed or truncated.
  UniqueFd file(::mkostemp(temporary.data(), O_CLOEXEC));
  if (!file) return file_error("write", path, errno);
  if (::fchmod(file.get(), 0644) != 0) {
    const int saved = errno;
    ::unlink(temporary.c_str());
    return file_error("write", path, saved);
  }
  return std::pair{std::move(file), std::move(temporary)};
}

int write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    ssize_t written = ::write(fd, text.data(), text.size());
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return written < 0 ? errno : ENOSPC;
    text.remove_prefix(static_cast<std::size_t>(written));
  }
  return 0;
}

std::optional<std::string> read_text_file(const std::string& path, std::size_t max_size) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (!fd) return std::nullopt;
  struct stat info {};
  std::optional<std::string> content;
  // A directory opens fine but reads nothing; a FIFO or device could block or never end.
  if (::fstat(fd.get(), &info) == 0 && S_ISREG(info.st_mode) && static_cast<std::size_t>(info.st_size) <= max_size) {
    std::string text;
    char buffer[65536];
    while (true) {
      ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) break;
      if (n == 0) {
        content = std::move(text);
        break;
      }
      text.append(buffer, static_cast<std::size_t>(n));
      if (text.size() > max_size) break;  // grew while we read it
    }
  }
  return content;  // fd closes on return: read-only, a failing close loses nothing
}

Result<std::vector<std::string>> make_directories(const std::string& path) {
  if (path.empty()) return make_error(exit_code::file_write, "cannot create an empty log directory path");
  std::vector<std::string> created;
  std::size_t position = 0;
  while (position != std::string::npos) {
    position = path.find('/', position + 1);
    std::string partial = path.substr(0, position);
    if (partial.empty() || partial == "/") continue;
    // An existing ancestor may be one we cannot write to (mkdir would say EACCES, not EEXIST).
    struct stat existing {};
    if (::stat(partial.c_str(), &existing) == 0 && S_ISDIR(existing.st_mode)) continue;
    if (::mkdir(partial.c_str(), 0755) == 0) {
      created.push_back(partial);
      continue;
    }
    if (errno == EEXIST) continue;
    int saved = errno;
    remove_created_directories(created);
    return file_error("create directory", partial, saved);
  }
  struct stat info {};
  int problem = ::stat(path.c_str(), &info) != 0 ? errno : (S_ISDIR(info.st_mode) ? 0 : ENOTDIR);
  if (problem != 0) {
    remove_created_directories(created);
    return file_error(problem == ENOTDIR ? "use as a directory" : "create directory", path, problem);
  }
  return created;
}

void remove_created_directories(const std::vector<std::string>& created) {
  for (auto it = created.rbegin(); it != created.rend(); ++it) ::rmdir(it->c_str());
}

Result<void> write_file_atomically(const std::string& path, const std::string& content) {
  return write_files_atomically({{path, content}});
}

Result<void> write_files_atomically(const std::vector<std::pair<std::string, std::string>>& files) {
  std::vector<std::string> temporaries;
  auto discard = [&] {
    for (const auto& temporary : temporaries) ::unlink(temporary.c_str());
  };
  for (const auto& [path, content] : files) {
    auto temporary = write_temporary(path, content);
    if (!temporary) {
      discard();
      return std::unexpected(temporary.error());
    }
    temporaries.push_back(*temporary);
  }
  for (std::size_t i = 0; i < files.size(); ++i) {
    if (::rename(temporaries[i].c_str(), files[i].first.c_str()) != 0) {
      int saved = errno;
      for (std::size_t j = i; j < temporaries.size(); ++j) ::unlink(temporaries[j].c_str());
      return file_error("rename to", files[i].first, saved);
    }
  }
  return {};
}

}  // namespace tfboot
