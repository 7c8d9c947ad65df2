// SIGTERM and SIGINT before the command runs: they end tfboot at once, or wait while files are
// written (docs/supervision.md: Running the command).
#pragma once

#include <array>
#include <string>

#include "base/error.h"

namespace tfboot {

// Before the command runs nothing has been started and nothing is half-written, so SIGTERM or
// SIGINT ends tfboot at once with 128+N (as PID 1 the kernel ignores signals without a handler,
// hence an explicit one). Installed first thing, so every wait honours them.
Result<void> install_stop_handlers();
// Where the handler writes the one-line reason as it ends tfboot (the termination message), when
// there is such a file; "" for none. Set before any wait; the text is made here, not in the handler.
void set_stop_message_file(const std::string& path);
// Called as the command starts: a stop signal that ends tfboot later, at a restart in place's
// barrier, then says the command had run and ended rather than that nothing was run.
void note_command_has_run();
// Why tfboot ended when a stop signal came between two runs of a restart in place.
inline constexpr const char* stopped_between_runs =
    "stopped by a signal while the job restarts in place; the command had ended and was not started again";

// A record the handler finishes as it ends tfboot between two runs of a restart in place
// (startup.json with its end): for each signal, the text around the moment it came, written to
// an open temporary and renamed over `path`. Armed while stop signals are held; disarmed (the
// temporary unlinked) before the next run's files are written.
struct StopRecord {
  std::string path;
  std::string temporary;
  int fd = -1;  // the temporary, open for writing; owned by the record once armed
  // [signal is SIGINT]: the text before the time in Unix seconds, between it and the same time in
  // ISO 8601 UTC with milliseconds, and after.
  std::array<std::array<std::string, 3>, 2> parts;
};
void arm_stop_record(StopRecord record);
void disarm_stop_record();
// While files are written a stop signal waits; release_stop_signals lets a held one end us.
Result<void> hold_stop_signals();
Result<void> release_stop_signals();

// Blocks until SIGTERM or SIGINT, then returns 0: a finished task that a StatefulSet would
// otherwise restart waits to be deleted. Reaps whatever ends meanwhile (as PID 1, orphans of a
// `kubectl exec` session come to us).
int idle_until_stopped();

}  // namespace tfboot
