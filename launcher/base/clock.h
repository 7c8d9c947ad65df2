// Time as tfboot measures it: one steady clock and its instants, the backoff between retries, and
// how a duration is written in log lines and errors.
#pragma once

#include <chrono>
#include <cstdint>
#include <random>
#include <string>

namespace tfboot {

// Never jumps with the wall clock (NTP, a resumed VM), so a deadline or a timer holds.
using SteadyClock = std::chrono::steady_clock;
// A point on SteadyClock; Instant::max() stands for "not planned".
using Instant = SteadyClock::time_point;

// The wall clock in Unix milliseconds: only for comparing two hosts' clocks, never for a deadline.
inline std::int64_t wall_clock_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Exponential backoff with "equal jitter": the delay doubles from `first` up to `most`, half of
// it fixed and half random, so that a thousand tasks retrying together spread out rather than
// come back at the same instant. Seeded, so that a test replays it.
class Backoff {
 public:
  Backoff(std::chrono::milliseconds first, std::chrono::milliseconds most, std::uint64_t seed)
      : first_(first), most_(most), random_(seed) {}
  // The pause after `failures` failed tries in a row (1: before the first retry).
  std::chrono::milliseconds delay_after(int failures);

 private:
  std::chrono::milliseconds first_, most_;
  std::mt19937_64 random_;
};

// "11s" for whole seconds, else to the tenth, "1.5s": for every duration a log line or an error
// shows (--wait, the start barrier's timeouts, silences).
std::string seconds_text(SteadyClock::duration duration);

}  // namespace tfboot
