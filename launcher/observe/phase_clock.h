// The start-up's phases timed into the start record (docs/observing.md): one clock that marks
// them off in order, and a timer for a phase that runs on a thread of its own.
#pragma once

#include <chrono>

#include "base/clock.h"
#include "observe/start_record.h"

namespace tfboot::observe {

// Marks the phases off one after another: each ends() measures from the previous mark.
class PhaseClock {
 public:
  explicit PhaseClock(Instant started) : started_(started), last_(started) {}
  void ended(Phase phase);
  // The command is about to start: the time since tfboot started (or the job restarted).
  void command_starts();
  // The job restarts in place: the barrier, the files and the time to the command are measured
  // anew from here; the plan and the DNS wait are not done again.
  void restarted();

 private:
  Instant started_;
  Instant last_;
};

// Times one phase from its construction to its end (the coordinator's name check, on a thread
// of its own).
class PhaseTimer {
 public:
  explicit PhaseTimer(Phase phase) : phase_(phase), began_(SteadyClock::now()) {}
  ~PhaseTimer() { phase_ended(phase_, std::chrono::duration<double>(SteadyClock::now() - began_).count()); }
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;

 private:
  Phase phase_;
  Instant began_;
};

}  // namespace tfboot::observe
