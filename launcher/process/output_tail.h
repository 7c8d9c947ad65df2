// The last lines of a command's stderr, kept in bounded memory, and the one among them that says
// why it failed: what the termination message and the other tasks' failure line name
// (docs/observing.md: The termination message).
#pragma once

#include <cstddef>
#include <deque>
#include <string>
#include <string_view>

namespace tfboot {

class OutputTail {
 public:
  static constexpr std::size_t max_lines = 32;
  static constexpr std::size_t max_line_bytes = 512;

  // One line of output without its line end; a longer one is kept cut.
  void add(std::string_view line);
  const std::deque<std::string>& lines() const { return lines_; }

 private:
  std::deque<std::string> lines_;
};

// The line that names the failure: the last one that reads as a Python exception
// ("RuntimeError: CUDA error: out of memory", "torch.OutOfMemoryError: ..."; a traceback's last
// line, whatever a library printed after it), else the last line that is not blank. One line of
// printable text, at most `max_failure_line` bytes (then "..."); "" when there is none.
inline constexpr std::size_t max_failure_line = 300;
std::string failure_line(const std::deque<std::string>& lines);

}  // namespace tfboot
