// Running the command: plain exec, or supervising it as PID 1 in the manner of tini (SPEC §7).
#include "process.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <optional>

#include "log.h"

namespace tfboot {
namespace {

sigset_t forwarded_set() {
  sigset_t set;
  sigemptyset(&set);
  for (int signal_number : forwarded_signals) sigaddset(&set, signal_number);
  return set;
}

}  // namespace

// execvp wants char* const[]; the strings outlive the call.
std::vector<char*> make_argv(const std::vector<std::string>& command) {
  std::vector<char*> argv;
  for (const auto& arg : command) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  return argv;
}

int exec_failure_code(int error_number) {
  // As a shell does: a missing file is 127, anything else that stops exec is 126.
  return error_number == ENOENT || error_number == ENOTDIR ? exit_code::not_found : exit_code::not_executable;
}

std::string exec_failure_message(const std::string& program, int error_number) {
  return "cannot run command '" + program + "': " +
         (error_number == ENOENT ? std::string("not found") : std::string(std::strerror(error_number)));
}

int status_to_exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return exit_code::signal_base + WTERMSIG(status);
  return 1;
}

void block_forwarded_signals() {
  sigset_t set = forwarded_set();
  ::sigprocmask(SIG_BLOCK, &set, nullptr);
}

void unblock_forwarded_signals() {
  sigset_t set = forwarded_set();
  ::sigprocmask(SIG_UNBLOCK, &set, nullptr);
}

Error exec_command(const std::vector<std::string>& command) {
  auto argv = make_argv(command);
  ::execvp(argv[0], argv.data());
  int saved = errno;
  return Error{exec_failure_code(saved), one_line(exec_failure_message(command[0], saved))};
}

Result<int> supervise_command(const std::vector<std::string>& command) {
  sigset_t supervised = forwarded_set();
  sigaddset(&supervised, SIGCHLD);

  // Blocked signals wait for sigtimedwait below. The command gets the mask we started with,
  // without the signals we block for ourselves (they may already be blocked by our caller).
  sigset_t original_mask;
  if (::sigprocmask(SIG_BLOCK, &supervised, &original_mask) != 0) {
    return make_error(1, std::string("sigprocmask failed: ") + std::strerror(errno));
  }
  for (int signal_number : forwarded_signals) sigdelset(&original_mask, signal_number);
  sigdelset(&original_mask, SIGCHLD);
  // Handing the terminal to the command's process group would stop us with SIGTTOU otherwise.
  struct sigaction ignore {}, old_ttin {}, old_ttou {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  ::sigaction(SIGTTIN, &ignore, &old_ttin);
  ::sigaction(SIGTTOU, &ignore, &old_ttou);

  // Not PID 1 (--init): become a subreaper so orphans of the command are still ours to reap.
  if (::getpid() != 1) ::prctl(PR_SET_CHILD_SUBREAPER, 1);

  auto argv = make_argv(command);
  pid_t child = ::fork();
  if (child < 0) {
    int saved = errno;
    ::sigprocmask(SIG_SETMASK, &original_mask, nullptr);
    return make_error(exit_code::not_executable, std::string("cannot start the command: fork failed: ") + std::strerror(saved));
  }
  if (child == 0) {
    // Own process group, so a signal forwarded to the group reaches the command's children too.
    ::setpgid(0, 0);
    if (::isatty(STDIN_FILENO)) ::tcsetpgrp(STDIN_FILENO, ::getpgrp());
    ::sigaction(SIGTTIN, &old_ttin, nullptr);
    ::sigaction(SIGTTOU, &old_ttou, nullptr);
    ::sigprocmask(SIG_SETMASK, &original_mask, nullptr);
    ::execvp(argv[0], argv.data());
    int saved = errno;
    std::string message = "tfboot: " + exec_failure_message(command[0], saved) + "\n";
    [[maybe_unused]] auto ignored = ::write(STDERR_FILENO, message.data(), message.size());
    ::_exit(exec_failure_code(saved));
  }
  // Also set here: whichever of parent and child runs first, the group exists before we signal it.
  ::setpgid(child, child);
  log::debug("supervising command as pid {}", child);

  std::optional<int> command_status;
  int stop_requests = 0;
  while (!command_status) {
    siginfo_t info{};
    timespec timeout{1, 0};
    int signal_number = ::sigtimedwait(&supervised, &info, &timeout);
    if (signal_number > 0 && signal_number != SIGCHLD) {
      // A command that ignores the first SIGTERM/SIGINT would otherwise keep the container
      // alive until the kubelet's SIGKILL; a second one (docker stop twice, Ctrl-C twice)
      // kills its whole process group. No timer of our own: terminationGracePeriodSeconds is
      // the user's choice of how long a checkpoint may take.
      bool stop = signal_number == SIGTERM || signal_number == SIGINT;
      if (stop && ++stop_requests >= 2) {
        log::warn("second stop signal: killing the command's process group");
        signal_number = SIGKILL;
      } else {
        log::info("passing signal {} to the command", signal_number);
      }
      if (::kill(-child, signal_number) != 0) ::kill(child, signal_number);
    }
    // Reap everything that has ended: the command, and orphans re-parented to us as PID 1.
    while (true) {
      int status = 0;
      pid_t ended = ::waitpid(-1, &status, WNOHANG);
      if (ended <= 0) break;
      if (ended == child) command_status = status_to_exit_code(status);
    }
  }
  log::info("command exited with status {}", *command_status);
  return *command_status;
}

}  // namespace tfboot
