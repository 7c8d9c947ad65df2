// Refused connections in the log at a bounded rate (docs/supervision.md: control channel
// security): a flood of strangers costs the log one line per interval, not one per connection,
// and a trainer's output is not pushed out of rotated logs by it.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>

#include "base/clock.h"

namespace tfboot {

// Counts refusals; says when a line is due. The first refusal is a line at once, as it always
// was; later ones wait for the interval and are then one line with their count and the last of
// them. Pure: the caller logs the line at the level it chooses.
class RefusalTally {
 public:
  explicit RefusalTally(std::chrono::milliseconds every) : every_(every) {}

  // A refusal, `what` saying whom and why ("a connection from 10.0.0.9:5123: job already
  // started"); the line to log now, if one is due.
  std::optional<std::string> note(const std::string& what, Instant now) {
    ++total_;
    ++unlogged_;
    if (total_ > 1 && now < next_line_) return std::nullopt;
    std::string line = "refused " + what;
    if (unlogged_ > 1) {
      line = "refused " + std::to_string(unlogged_) + " connections in " + seconds_text(now - last_line_) + " (" +
             std::to_string(total_) + " so far); the last: " + what;
    }
    unlogged_ = 0;
    last_line_ = now;
    next_line_ = now + every_;
    return line;
  }

  std::size_t total() const { return total_; }

 private:
  std::chrono::milliseconds every_;
  std::size_t total_ = 0;
  std::size_t unlogged_ = 0;  // refusals since the last line, this one included
  Instant last_line_{};
  Instant next_line_{};
};

}  // namespace tfboot
