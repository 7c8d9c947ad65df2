// Errors as values: an exit code (SPEC §9) and a one-line message that names its source.
#pragma once

#include <expected>
#include <string>
#include <utility>

namespace tfboot {

namespace exit_code {
inline constexpr int ok = 0;
inline constexpr int usage = 2;
inline constexpr int peers_unresolved = 3;
inline constexpr int file_write = 4;
inline constexpr int not_executable = 126;
inline constexpr int not_found = 127;
inline constexpr int signal_base = 128;
}  // namespace exit_code

struct Error {
  int code = exit_code::usage;
  std::string message;
};

template <typename T>
using Result = std::expected<T, Error>;

inline std::unexpected<Error> usage_error(std::string message) {
  return std::unexpected(Error{exit_code::usage, std::move(message)});
}

inline std::unexpected<Error> make_error(int code, std::string message) {
  return std::unexpected(Error{code, std::move(message)});
}

}  // namespace tfboot
