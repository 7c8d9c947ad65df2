// Time as tfboot measures it: one steady clock and its instants, for every deadline and timer.
#pragma once

#include <chrono>

namespace tfboot {

// Never jumps with the wall clock (NTP, a resumed VM), so a deadline or a timer holds.
using SteadyClock = std::chrono::steady_clock;
// A point on SteadyClock; Instant::max() stands for "not planned".
using Instant = SteadyClock::time_point;

}  // namespace tfboot
