// The phases' clock (phase_clock.h).
#include "observe/phase_clock.h"

namespace tfboot::observe {

void PhaseClock::ended(Phase phase) {
  const Instant now = SteadyClock::now();
  phase_ended(phase, std::chrono::duration<double>(now - last_).count());
  last_ = now;
}

void PhaseClock::restarted() {
  started_ = last_ = SteadyClock::now();
  update([](StartRecord& record) {
    record.command_started = false;
    record.command_running = false;
    record.seconds_to_command.reset();
    record.phase_seconds[static_cast<std::size_t>(Phase::barrier)].reset();
    record.phase_seconds[static_cast<std::size_t>(Phase::name_check)].reset();
    record.phase_seconds[static_cast<std::size_t>(Phase::files)].reset();
  });
}

void PhaseClock::command_starts() {
  const double seconds = std::chrono::duration<double>(SteadyClock::now() - started_).count();
  update([&](StartRecord& record) {
    record.seconds_to_command = seconds;
    record.command_started = true;
    record.command_running = true;
  });
}

}  // namespace tfboot::observe
