// SIGTERM and SIGINT before the command runs (stop_signals.h).
#include "process/stop_signals.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "base/log.h"
#include "base/text.h"

namespace tfboot {
namespace {

std::unexpected<Error> signal_setup_error(const std::string& call) {
  return errno_error(exit_code::resources, call + " failed", errno);
}

sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

// Set once the command has run: a stop signal after that comes between two runs of a restart in
// place, when the command has ended and is not running again yet.
volatile sig_atomic_t command_has_run = 0;

void exit_on_stop_signal(int signal_number) {
  log::write_from_signal_handler(log::Level::warning,
                                 command_has_run ? "stopped by a signal while the job restarts in place; the command had ended and was not started again"
                                                 : "stopped by a signal before the command started; nothing was run");
  ::_exit(exit_code::signal_base + signal_number);
}

}  // namespace

Result<void> install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = exit_on_stop_signal;
  sigemptyset(&action.sa_mask);
  if (::sigaction(SIGTERM, &action, nullptr) != 0 || ::sigaction(SIGINT, &action, nullptr) != 0) {
    return signal_setup_error("sigaction");
  }
  // A parent may have left them blocked; then they would never reach the handler.
  sigset_t set = stop_signals();
  if (::sigprocmask(SIG_UNBLOCK, &set, nullptr) != 0) return signal_setup_error("sigprocmask");
  return {};
}

void note_command_has_run() { command_has_run = 1; }

Result<void> hold_stop_signals() {
  sigset_t set = stop_signals();
  if (::sigprocmask(SIG_BLOCK, &set, nullptr) != 0) return signal_setup_error("sigprocmask");
  return {};
}

Result<void> release_stop_signals() {
  sigset_t set = stop_signals();
  if (::sigprocmask(SIG_UNBLOCK, &set, nullptr) != 0) return signal_setup_error("sigprocmask");
  return {};
}

int idle_until_stopped() {
  sigset_t stop = stop_signals();
  int received = 0;
  while (::sigwait(&stop, &received) != 0) {
  }
  log::info("{}: the idle task ends", signal_name(received));
  return exit_code::ok;
}

}  // namespace tfboot
