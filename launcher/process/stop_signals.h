// SIGTERM and SIGINT before the command runs: they end tfboot at once, or wait while files are
// written (docs/supervision.md: Running the command).
#pragma once

#include "base/error.h"

namespace tfboot {

// Before the command runs nothing has been started and nothing is half-written, so SIGTERM or
// SIGINT ends tfboot at once with 128+N (as PID 1 the kernel ignores signals without a handler,
// hence an explicit one). Installed first thing, so every wait honours them.
Result<void> install_stop_handlers();
// Called as the command starts: a stop signal that ends tfboot later, at a restart in place's
// barrier, then says the command had run and ended rather than that nothing was run.
void note_command_has_run();
// While files are written a stop signal waits; release_stop_signals lets a held one end us.
Result<void> hold_stop_signals();
Result<void> release_stop_signals();

// Blocks until SIGTERM or SIGINT, then returns 0: a finished task that a StatefulSet would
// otherwise restart waits to be deleted. Needs those signals blocked (a ChildSet does that).
int idle_until_stopped();

}  // namespace tfboot
