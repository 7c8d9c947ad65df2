// Starting the command: the one place that calls exec (exec.h).
#include "process/exec.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tfboot {
namespace {

std::vector<char*> null_ended(const std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  pointers.reserve(strings.size() + 1);
  for (const auto& text : strings) pointers.push_back(const_cast<char*>(text.c_str()));
  pointers.push_back(nullptr);
  return pointers;
}

// Only sigaction and sigprocmask: async-signal-safe, as the forked child needs.
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

// As a shell does: 127 when the program is missing, 126 for anything else that stops exec.
Error exec_failure(const std::string& program, int error_number) {
  int code = error_number == ENOENT || error_number == ENOTDIR ? exit_code::not_found : exit_code::not_executable;
  return Error{code, one_line("cannot run command '" + program + "': " +
                              (error_number == ENOENT ? std::string("not found") : std::string(std::strerror(error_number))))};
}

}  // namespace

PreparedCommand::PreparedCommand(std::vector<std::string> argv, std::vector<std::string> environment)
    : argv_strings_(std::move(argv)),
      environment_strings_(std::move(environment)),
      argv_(null_ended(argv_strings_)),
      envp_(null_ended(environment_strings_)) {}

Error exec_command(const PreparedCommand& command) {
  reset_signal_state();
  ::execvpe(command.argv_[0], command.argv_.data(), command.envp_.data());
  // Only this failure report allocates; the process ends right after it.
  return exec_failure(command.program(), errno);
}

Error exec_command(const std::vector<std::string>& command, const std::vector<std::string>& environment) {
  return exec_command(PreparedCommand(command, environment));
}

int status_to_exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return exit_code::signal_base + WTERMSIG(status);
  return 1;
}

}  // namespace tfboot
