// Errors as values: an exit code (docs/supervision.md: Exit codes) and a one-line message that names its source.
#pragma once

#include <cerrno>
#include <cstring>
#include <expected>
#include <string>

namespace tfboot {

namespace exit_code {
inline constexpr int ok = 0;
inline constexpr int usage = 2;
inline constexpr int peers_unresolved = 3;
inline constexpr int file_write = 4;
inline constexpr int start_barrier_incomplete = 5;
inline constexpr int environment_mismatch = 6;
// The system refused a resource: memory, processes (fork), descriptors, a free port.
inline constexpr int resources = 7;
// --preflight refused the start: a node cannot run the job (a full log root, a clock off, other
// accelerators). Worth a retry on another node, unlike a usage error.
inline constexpr int preflight_refused = 8;
inline constexpr int not_executable = 126;
inline constexpr int not_found = 127;
inline constexpr int signal_base = 128;
// Above every 128+N a signal can produce, and in 128-255 so that TFJob's `restartPolicy: ExitCode`
// treats it as retryable: the job as a whole failed because of another task, not this one.
inline constexpr int job_stopped = 200;
}  // namespace exit_code

struct Error {
  int code = exit_code::usage;
  std::string message;
};

template <typename T>
using Result = std::expected<T, Error>;

// Messages quote what users gave us, which may hold newlines or other control characters;
// escaped here so that every error stays one line.
inline std::string one_line(const std::string& text) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string result;
  result.reserve(text.size());
  for (unsigned char c : text) {
    if (c == '\n') result += "\\n";
    else if (c == '\t') result += "\\t";
    else if (c < 0x20 || c == 0x7f) result += std::string("\\x") + hex[c >> 4] + hex[c & 15];
    else result += static_cast<char>(c);
  }
  return result;
}

inline std::unexpected<Error> make_error(int code, const std::string& message) {
  return std::unexpected(Error{code, one_line(message)});
}

// "what: strerror": a failed system call, named, for a message or a log line.
inline std::string errno_text(const std::string& what, int error_number) { return what + ": " + std::strerror(error_number); }
// The same as an error with `code`, usually exit_code::resources.
inline std::unexpected<Error> errno_error(int code, const std::string& what, int error_number) {
  return make_error(code, errno_text(what, error_number));
}

inline std::unexpected<Error> usage_error(const std::string& message) { return make_error(exit_code::usage, message); }

}  // namespace tfboot
