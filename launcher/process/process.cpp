// Running the command: plain exec, or supervising it as an init in the manner of tini and
// dumb-init (README: Running the command).
#include "process/process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "process/child_set.h"
#include "base/log.h"

namespace tfboot {
namespace {

using namespace std::chrono_literals;

std::unexpected<Error> signal_setup_error(const std::string& call) {
  return make_error(exit_code::resources, call + " failed: " + std::strerror(errno));
}

sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

void exit_on_stop_signal(int signal_number) {
  log::write_from_signal_handler(log::Level::warning, "stopped by a signal before the command started; nothing was run");
  ::_exit(exit_code::signal_base + signal_number);
}

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
  SteadyTime term_at = SteadyTime::max();  // when the job's stop sends SIGTERM
  SteadyTime kill_at = SteadyTime::max();  // when the grace after it runs out
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
  log::info("passing signal {} to the command", signal_number);
  state.children.signal(state.command, signal_number);
  // Job control as dumb-init does it: the command stops, and so do we, until SIGCONT.
  if (is_job_control_stop(signal_number)) ::kill(::getpid(), SIGSTOP);
}

// Once the job is done, the command gets a moment to end by itself (a worker of a
// MultiWorkerMirroredStrategy job finishes the same step as the chief) before SIGTERM; after
// another task failed it gets SIGTERM at once. SIGKILL follows after --stop-grace.
void follow_job(InitState& state, const std::vector<pollfd>& fds) {
  if (!state.settings.job || state.decision) return;
  auto decision = state.settings.job->process(fds, std::chrono::steady_clock::now());
  if (!decision) return;
  state.decision = decision;
  bool done = decision->exit_code == exit_code::ok;
  if (done) log::info("{}", decision->reason);
  else log::error("{}", decision->reason);
  state.term_at = std::chrono::steady_clock::now() + (done ? state.settings.finish_window : std::chrono::milliseconds(0));
}

void enforce_stop_times(InitState& state) {
  auto now = std::chrono::steady_clock::now();
  if (now >= state.term_at) {
    log::info("stopping the command: SIGTERM, SIGKILL after {}ms", state.settings.stop_grace.count());
    state.children.signal(state.command, SIGTERM);
    state.term_at = SteadyTime::max();
    state.kill_at = now + state.settings.stop_grace;
  }
  if (now >= state.kill_at) {
    log::warn("the command did not stop within --stop-grace: killing its process group");
    state.children.signal(state.command, SIGKILL);
    state.kill_at = SteadyTime::max();
  }
}

SteadyTime next_wakeup(const InitState& state) {
  SteadyTime wake = std::min(state.term_at, state.kill_at);
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
  if (children.wait_for_group_to_end(command, std::chrono::steady_clock::now() + grace)) return;
  log::warn("processes of the command's group still running after the grace period: SIGKILL");
  ::kill(-children.pid(command), SIGKILL);
  children.wait_for_group_to_end(command, std::chrono::steady_clock::now() + 1s);
}

}  // namespace

std::vector<char*> make_argv(const std::vector<std::string>& strings) {
  std::vector<char*> argv;
  argv.reserve(strings.size() + 1);
  for (const auto& text : strings) argv.push_back(const_cast<char*>(text.c_str()));
  argv.push_back(nullptr);
  return argv;
}

int exec_failure_code(int error_number) {
  return error_number == ENOENT || error_number == ENOTDIR ? exit_code::not_found : exit_code::not_executable;
}

std::string exec_failure_message(const std::string& program, int error_number) {
  return one_line("cannot run command '" + program + "': " +
                  (error_number == ENOENT ? std::string("not found") : std::string(std::strerror(error_number))));
}

int status_to_exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return exit_code::signal_base + WTERMSIG(status);
  return 1;
}

void write_all(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

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

void reset_signal_state() {
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  for (int signal_number = 1; signal_number < NSIG; ++signal_number) {
    if (signal_number == SIGKILL || signal_number == SIGSTOP) continue;
    ::sigaction(signal_number, &default_action, nullptr);  // EINVAL for the few glibc reserves: fine
  }
  sigset_t empty;
  sigemptyset(&empty);
  ::sigprocmask(SIG_SETMASK, &empty, nullptr);
}

Error exec_command(const std::vector<std::string>& command, const std::vector<std::string>& environment) {
  reset_signal_state();
  auto argv = make_argv(command);
  auto envp = make_argv(environment);
  ::execvpe(argv[0], argv.data(), envp.data());
  int saved = errno;
  return Error{exec_failure_code(saved), exec_failure_message(command[0], saved)};
}

int idle_until_stopped() {
  sigset_t stop = stop_signals();
  int received = 0;
  while (::sigwait(&stop, &received) != 0) {
  }
  log::info("signal {}: the idle task ends", received);
  return exit_code::ok;
}

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
