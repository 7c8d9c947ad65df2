// Threads of tfboot's own (the metrics server, a relay, the link kept alive after the start).
#pragma once

#include <functional>
#include <string_view>
#include <thread>

#include "base/error.h"

namespace tfboot {

// Starts `body` on a thread with every signal blocked: a stop signal or SIGCHLD must reach the
// supervisor's signalfd or handler on the main thread, never a thread that would take its default
// action or swallow it. exit_code::resources, naming `what`, when no thread can be made.
Result<std::thread> start_thread_without_signals(std::function<void()> body, std::string_view what);

}  // namespace tfboot
