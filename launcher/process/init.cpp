// Init mode: supervising the command as tini and dumb-init do (init.h).
#include "process/init.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/log.h"
#include "base/text.h"
#include "process/child_set.h"
#include "process/stop_schedule.h"

namespace tfboot {
namespace {

using namespace std::chrono_literals;

bool is_job_control_stop(int signal_number) {
  return signal_number == SIGTSTP || signal_number == SIGTTIN || signal_number == SIGTTOU;
}

// The supervisor's state for one command.
struct InitState {
  ChildSet& children;
  const InitSettings& settings;
  std::size_t command = 0;
  int stop_requests = 0;
  std::optional<JobOutcome> decision;  // the job told us to stop
  StopSchedule stop{settings.stop_grace};  // the job's stop: SIGTERM, SIGKILL after the grace
};

void pass_on_signal(InitState& state, int signal_number) {
  // A command that ignores the first SIGTERM/SIGINT would otherwise keep the container alive
  // until the kubelet's SIGKILL; a second one (docker stop twice, Ctrl-C twice) kills its whole
  // process group. terminationGracePeriodSeconds remains the user's choice of how long a
  // checkpoint may take.
  bool stop = signal_number == SIGTERM || signal_number == SIGINT;
  if (stop && ++state.stop_requests >= 2) {
    log::warn("second stop signal: killing the command's process group");
    state.children.signal(state.command, SIGKILL);
    return;
  }
  // Job control as dumb-init does it in its default (setsid) mode: the command's group has no
  // terminal, where SIGTSTP, SIGTTIN and SIGTTOU may be ignored or caught, so it gets SIGSTOP,
  // which it cannot refuse; then we stop too, until SIGCONT resumes us and is passed on.
  if (is_job_control_stop(signal_number)) {
    log::info("{}: stopping the command (SIGSTOP) and tfboot until SIGCONT", signal_name(signal_number));
    state.children.signal(state.command, SIGSTOP);
    ::kill(::getpid(), SIGSTOP);
    return;
  }
  log::info("passing {} to the command", signal_name(signal_number));
  state.children.signal(state.command, signal_number);
}

// Once the job is done, the command gets the finish window to end by itself before SIGTERM;
// after another task failed it gets SIGTERM at once. SIGKILL follows after --stop-grace.
void follow_job(InitState& state, const std::vector<pollfd>& fds) {
  if (!state.settings.job || state.decision) return;
  auto decision = state.settings.job->process(fds, SteadyClock::now());
  if (!decision) return;
  state.decision = decision;
  bool done = decision->exit_code == exit_code::ok;
  if (done) log::info("{}", decision->reason);
  else log::error("{}", decision->reason);
  state.stop.terminate_at(SteadyClock::now() + (done ? finish_window : std::chrono::milliseconds(0)));
}

void enforce_stop_times(InitState& state) {
  const Instant now = SteadyClock::now();
  for (auto step = state.stop.due(now); step != StopSchedule::Step::none; step = state.stop.due(now)) {
    if (step == StopSchedule::Step::terminate) {
      log::info("stopping the command: SIGTERM, SIGKILL after {}", seconds_text(state.settings.stop_grace));
      state.children.signal(state.command, SIGTERM);
    } else {
      log::warn("the command did not stop within --stop-grace: killing its process group");
      state.children.signal(state.command, SIGKILL);
    }
  }
}

Instant next_wakeup(const InitState& state) {
  Instant wake = state.stop.next();
  if (state.settings.job && !state.decision) wake = std::min(wake, state.settings.job->next_wakeup());
  return wake;
}

// Until the command has ended: signals passed on, the job followed, the grace enforced.
int wait_for_command(InitState& state) {
  while (true) {
    std::vector<pollfd> fds;
    if (state.settings.job && !state.decision) state.settings.job->add_poll_fds(fds);
    ChildSet::Event event = state.children.wait(next_wakeup(state), fds);
    switch (event.kind) {
      case ChildSet::Event::Kind::signal: pass_on_signal(state, event.signal_number); break;
      case ChildSet::Event::Kind::exited:
        if (event.child == state.command) return event.exit_code;
        break;
      case ChildSet::Event::Kind::ready:
      case ChildSet::Event::Kind::timeout: follow_job(state, fds); break;
    }
    enforce_stop_times(state);
  }
}

// What the command left in its process group gets SIGTERM, and SIGKILL after the grace, as
// dumb-init does; as PID 1 they would otherwise outlive it until the container ends.
void end_leftovers(ChildSet& children, std::size_t command, std::chrono::milliseconds grace) {
  if (::kill(-children.pid(command), SIGTERM) != 0) return;  // nothing left
  log::info("the command left processes in its group: SIGTERM");
  if (children.wait_for_group_to_end(command, SteadyClock::now() + grace)) return;
  log::warn("processes of the command's group still running after the grace period: SIGKILL");
  ::kill(-children.pid(command), SIGKILL);
  children.wait_for_group_to_end(command, SteadyClock::now() + 1s);
}

}  // namespace

Result<int> supervise_command(ChildSet& children, const std::vector<std::string>& command,
                              const std::vector<std::string>& environment, const InitSettings& settings) {
  auto started = children.start(ChildSpec{command, environment, ""});
  if (!started) return std::unexpected(started.error());
  // Hold no reference to the start directory (a volume the user may want to unmount).
  if (::chdir("/") != 0) log::debug("chdir / failed: {}", std::strerror(errno));
  InitState state{children, settings, *started};
  int status = wait_for_command(state);
  log::info("command exited with status {}", status);
  end_leftovers(children, state.command, settings.stop_grace);
  if (state.decision) return state.decision->exit_code;
  if (settings.job) settings.job->report_exit(status);
  return status;
}

}  // namespace tfboot
