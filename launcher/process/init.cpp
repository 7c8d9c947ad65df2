// Init mode: supervising the command as tini and dumb-init do (init.h).
#include "process/init.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
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

// The supervisor's state for the command's processes.
struct InitState {
  ChildSet& children;
  const InitSettings& settings;
  const std::vector<CommandProcess>& processes;
  std::vector<std::size_t> ids;  // each process's child in `children`
  int stop_requests = 0;
  int stop_signal = 0;  // the first stop signal that came to tfboot
  bool stopped_with_the_job = false;  // another task's stop signal was passed to the command (--stop-together)
  std::optional<JobOutcome> decision;  // the job told us to stop
  // What the job decided while the task's own processes were being stopped after its own failure:
  // the task's status is its own; this says only whether the job restarts.
  std::optional<JobOutcome> held;
  std::optional<int> failure;          // the first process that failed decides the task's status
  std::optional<int> first_failed;     // the first non-zero status, even after the job decided
  std::string failure_detail;          // and what it left to say
  StopSchedule stop{settings.stop_grace};  // SIGTERM, SIGKILL after the grace
  int stopped_with = 0;                    // the last signal tfboot itself sent to stop the command
  std::size_t running = 0;

  void signal_all(int signal_number) {
    for (std::size_t id : ids) children.signal(id, signal_number);
  }
  std::string what() const { return processes.size() == 1 ? "the command" : "the command's processes"; }
};

// "command exited with status 3", "command stopped by tfboot (SIGTERM); status 143".
std::string how_it_ended(const InitState& state, int status) {
  if (state.stopped_with != 0 && status == exit_code::signal_base + state.stopped_with) {
    return "stopped by tfboot (" + signal_name(state.stopped_with) + "); status " + std::to_string(status);
  }
  return "exited with status " + std::to_string(status);
}

// The run's last line: the exit status and why; startup.json records the same end.
SupervisionEnd closing(SupervisionEnd end) {
  log::info("exiting {}: {}", end.exit_code, end.message);
  return end;
}

// How the job's decision ends the task, once its command has ended with `status`.
SupervisionEnd job_end(const JobOutcome& outcome, int status) {
  switch (outcome.action) {
    case JobAction::restart:  // the command's own status, for startup.json's history
      return {status, EndReason::restarting, outcome.reason, outcome.failed_task};
    case JobAction::stop_together:
      // A command that saved its work and exited 0 is still not done: the job must be run again.
      return {status != exit_code::ok ? status : outcome.exit_code, EndReason::stopped_together, outcome.reason,
              outcome.failed_task};
    case JobAction::end: break;
  }
  return {outcome.exit_code, outcome.exit_code == exit_code::ok ? EndReason::job_done : EndReason::job_failed, outcome.reason,
          outcome.failed_task};
}

// The log's last line for an end, unless the job goes on (a restart). A task asked to stop does
// not rejoin: its pod is going away.
SupervisionEnd closing_unless_restarting(const InitState& state, SupervisionEnd end) {
  if (end.reason != EndReason::restarting) return closing(std::move(end));
  if (state.stop_requests == 0) return end;
  const int status = end.exit_code != exit_code::ok ? end.exit_code : exit_code::signal_base + state.stop_signal;
  return closing({status, EndReason::stopped_by_signal, "asked to stop while the job restarts: " + end.message, end.failed_task});
}

void pass_on_signal(InitState& state, int signal_number) {
  // A command that ignores the first SIGTERM/SIGINT would otherwise keep the container alive
  // until the kubelet's SIGKILL; a second one (docker stop twice, Ctrl-C twice) kills its whole
  // process group. terminationGracePeriodSeconds remains the user's choice of how long a
  // checkpoint may take.
  bool stop = signal_number == SIGTERM || signal_number == SIGINT;
  if (stop && ++state.stop_requests >= 2) {
    log::warn("second stop signal: killing {} (each process group)", state.what());
    state.signal_all(SIGKILL);
    return;
  }
  if (stop) {
    state.stop_signal = signal_number;
    // A drained node or a reclaimed spot instance: with --stop-together every rank hears it now,
    // and can save the same step, rather than failing on a missing peer later.
    if (state.settings.job && !state.decision) state.settings.job->report_stop_signal(signal_number);
    // The whole job deleted: the kubelet's signal may come after the job's. The command has it
    // already; a second one could cut its save short.
    if (state.stopped_with_the_job) {
      log::info("{}: the command has it already (the job's stop)", signal_name(signal_number));
      return;
    }
  }
  // Job control as dumb-init does it in its default (setsid) mode: the command's group has no
  // terminal, where SIGTSTP, SIGTTIN and SIGTTOU may be ignored or caught, so it gets SIGSTOP,
  // which it cannot refuse; then we stop too, until SIGCONT resumes us and is passed on.
  if (is_job_control_stop(signal_number)) {
    log::info("{}: stopping {} (SIGSTOP) and tfboot until SIGCONT", signal_name(signal_number), state.what());
    state.signal_all(SIGSTOP);
    ::kill(::getpid(), SIGSTOP);
    return;
  }
  log::info("passing {} to {}", signal_name(signal_number), state.what());
  state.signal_all(signal_number);
}

// Once the job is done, the command gets the finish window to end by itself before SIGTERM;
// after another task failed it gets SIGTERM at once. SIGKILL follows after --stop-grace.
void follow_job(InitState& state, const std::vector<pollfd>& fds) {
  if (!state.settings.job || state.decision || state.held) return;
  auto decision = state.settings.job->process(fds, SteadyClock::now());
  // After the task's own failure the link still keeps its heartbeats and reads, so that a rank
  // slow to die does not make the task look lost; a decision meanwhile waits for its status.
  if (state.failure) {
    state.held = decision;
    return;
  }
  if (!decision) return;
  state.decision = decision;
  if (decision->action == JobAction::stop_together) {
    log::warn("{}", decision->reason);
    if (state.stop_requests > 0) return;  // this task's own stop signal: passed on already
    state.stopped_with_the_job = true;
    state.stop.terminate_at(SteadyClock::now());
    return;
  }
  bool done = decision->exit_code == exit_code::ok && decision->action == JobAction::end;
  if (done) log::info("{}", decision->reason);
  else log::error("{}", decision->reason);
  state.stop.terminate_at(SteadyClock::now() + (done ? finish_window : std::chrono::milliseconds(0)));
}

void enforce_stop_times(InitState& state) {
  const Instant now = SteadyClock::now();
  for (auto step = state.stop.due(now); step != StopSchedule::Step::none; step = state.stop.due(now)) {
    if (step == StopSchedule::Step::terminate) {
      log::info("stopping {}: SIGTERM, SIGKILL after {}", state.what(), seconds_text(state.settings.stop_grace));
      state.stopped_with = SIGTERM;
      state.signal_all(SIGTERM);
    } else {
      log::warn("{} did not stop within --stop-grace: killing {}", state.what(),
                state.processes.size() == 1 ? "its process group" : "their process groups");
      state.stopped_with = SIGKILL;
      state.signal_all(SIGKILL);
    }
  }
}

// One process ended. The first failure is the task's: the others are stopped now.
void on_process_exit(InitState& state, std::size_t process, int status) {
  --state.running;
  const std::string& name = state.processes[process].name;
  if (state.processes.size() > 1) log::info("{} {}", name, how_it_ended(state, status));
  if (status != exit_code::ok && !state.first_failed) state.first_failed = status;
  if (status == exit_code::ok || state.failure || state.decision) return;
  state.failure = status;
  if (state.settings.failure_detail) state.failure_detail = state.settings.failure_detail(process, status);
  if (state.running == 0) return;
  log::error("{} failed{}{}; stopping the other processes of the task", name,
             state.failure_detail.empty() ? "" : ": ", state.failure_detail);
  state.stop.terminate_at(SteadyClock::now());
}

// The command is done, the job not yet: the task waits for the job's outcome, keeping
// heartbeats, and ends with it (a task done early that exited 0 while the job then failed would
// never be run again by an Indexed Job, nor rejoin from an idle StatefulSet pod). The coordinator
// of a PyTorch or JAX job waits so for every other task. A stop signal ends the wait.
std::optional<JobOutcome> wait_for_the_job(InitState& state) {
  JobView& job = *state.settings.job;
  if (!job.awaits_other_tasks()) return std::nullopt;
  log::info("{}", state.failure ? "this task failed; waiting for the job to restart or stop (--max-restarts)"
                                 : "this task is done; waiting for the job's outcome (the others' end, or a failure)");
  while (true) {
    std::vector<pollfd> fds;
    job.add_poll_fds(fds);
    ChildSet::Event event = state.children.wait(job.next_wakeup(), fds);
    if (event.kind == ChildSet::Event::Kind::signal) {
      if (event.signal_number == SIGTERM || event.signal_number == SIGINT) {
        log::info("{}: no longer waiting for the other tasks", signal_name(event.signal_number));
        return std::nullopt;
      }
      continue;
    }
    if (event.kind == ChildSet::Event::Kind::exited) continue;
    if (auto decision = job.process(fds, SteadyClock::now())) {
      if (decision->action == JobAction::restart) log::error("{}", decision->reason);
      else if (decision->exit_code == exit_code::ok) log::info("{}", decision->reason);
      else log::error("the job failed after this task was done: {}", decision->reason);
      return decision;
    }
  }
}


Instant next_wakeup(const InitState& state) {
  Instant wake = state.stop.next();
  if (state.settings.job && !state.decision && !state.held) wake = std::min(wake, state.settings.job->next_wakeup());
  return wake;
}

// Until every process has ended: signals passed on, the job followed, the grace enforced.
void wait_for_processes(InitState& state) {
  while (state.running > 0 || state.children.has_pending_events()) {
    std::vector<pollfd> fds;
    if (state.settings.job && !state.decision && !state.held) state.settings.job->add_poll_fds(fds);
    ChildSet::Event event = state.children.wait(next_wakeup(state), fds);
    switch (event.kind) {
      case ChildSet::Event::Kind::signal: pass_on_signal(state, event.signal_number); break;
      case ChildSet::Event::Kind::exited:
        if (auto it = std::ranges::find(state.ids, event.child); it != state.ids.end()) {
          on_process_exit(state, static_cast<std::size_t>(it - state.ids.begin()), event.exit_code);
        }
        break;
      case ChildSet::Event::Kind::ready:
      case ChildSet::Event::Kind::timeout: follow_job(state, fds); break;
    }
    enforce_stop_times(state);
  }
}

// What a process left in its process group gets SIGTERM, and SIGKILL after the grace, as
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

void end_stray_processes(std::chrono::milliseconds grace) {
  if (::getpid() != 1 || ::kill(-1, SIGTERM) != 0) return;  // not init, or nothing left (ESRCH)
  log::info("the last run left processes outside its process group: SIGTERM before the restart");
  const Instant deadline = SteadyClock::now() + grace;
  while (SteadyClock::now() < deadline) {
    const pid_t reaped = ::waitpid(-1, nullptr, WNOHANG);
    if (reaped < 0 && errno == ECHILD) return;
    if (reaped <= 0) ::usleep(20'000);
  }
  log::warn("processes of the last run still running after the grace period: SIGKILL");
  ::kill(-1, SIGKILL);
  while (::waitpid(-1, nullptr, 0) > 0) {
  }
}

std::string_view to_string(EndReason reason) {
  switch (reason) {
    case EndReason::command_succeeded: return "command_succeeded";
    case EndReason::command_failed: return "command_failed";
    case EndReason::stopped_by_signal: return "stopped_by_signal";
    case EndReason::job_done: return "job_done";
    case EndReason::job_failed: return "job_failed";
    case EndReason::restarting: return "restarting";
    case EndReason::stopped_together: return "stopped_together";
  }
  return "command_failed";
}

Result<SupervisionEnd> supervise_command(ChildSet& children, const std::vector<CommandProcess>& processes, const InitSettings& settings) {
  InitState state{children, settings, processes, {}};
  for (const CommandProcess& process : processes) {
    // On failure the ChildSet's destructor stops and reaps the processes already started.
    auto started = children.start(process.spec);
    if (!started) return std::unexpected(started.error());
    state.ids.push_back(*started);
    ++state.running;
  }
  // Hold no reference to the start directory (a volume the user may want to unmount).
  if (::chdir("/") != 0) log::debug("chdir / failed: {}", std::strerror(errno));
  wait_for_processes(state);
  children.drain_output(1s);
  const int status = state.failure.value_or(exit_code::ok);
  if (processes.size() == 1) log::info("command {}", how_it_ended(state, children.exit_code(state.ids[0]).value_or(status)));
  else log::info("the command's {} processes ended; the task's status is {}", processes.size(), status);
  for (std::size_t id : state.ids) end_leftovers(children, id, settings.stop_grace);
  if (state.decision) return closing_unless_restarting(state, job_end(*state.decision, state.first_failed.value_or(exit_code::ok)));
  std::optional<JobOutcome> outcome = state.held;
  if (settings.job) {
    // A task asked to stop ends whatever the job decides: its failure must not restart the job.
    const bool rejoins = state.stop_requests == 0;
    settings.job->report_exit(status, state.failure_detail, rejoins);
    // Done: the job's end decides ours. Failed: the job restarts, or stops (then ours is the status).
    if (!outcome && rejoins && (status == exit_code::ok || settings.job->may_restart())) outcome = wait_for_the_job(state);
    if (outcome && status != exit_code::ok && outcome->action == JobAction::end) outcome.reset();
    // A restart keeps the channel until the command is stopped; the caller closes it then.
    if (!outcome || outcome->action != JobAction::restart) settings.job->finish();
  }
  if (outcome) return closing_unless_restarting(state, job_end(*outcome, status));
  if (status != exit_code::ok && state.stop_requests > 0) {
    return closing({status, EndReason::stopped_by_signal, "asked to stop: the command exited with status " + std::to_string(status)});
  }
  if (state.stop_requests > 0 && settings.job && settings.job->stops_together()) {
    return closing({exit_code::signal_base + state.stop_signal, EndReason::stopped_by_signal,
                    "asked to stop: the command exited with status 0, before the job was done (--stop-together: a status "
                    "that asks for the job to run again)"});
  }
  if (status != exit_code::ok) {
    return closing({status, EndReason::command_failed,
                    "the command failed" + (state.failure_detail.empty() ? std::string() : ": " + state.failure_detail)});
  }
  return closing({status, EndReason::command_succeeded, "the command succeeded"});
}

}  // namespace tfboot
