// Running the command: plain exec, or supervising it as PID 1 in the manner of tini (SPEC §7).
#pragma once

#include <csignal>
#include <string>
#include <vector>

#include "error.h"

namespace tfboot {

// The signals an init passes on to the command.
inline constexpr int forwarded_signals[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

// execvp's argument vector over `command`'s strings, which must outlive it.
std::vector<char*> make_argv(const std::vector<std::string>& command);
// As a shell does: 127 when the program is missing, 126 for anything else that stops exec.
int exec_failure_code(int error_number);
std::string exec_failure_message(const std::string& program, int error_number);
// A waitpid status as an exit code: the status, or 128+N when signal N ended the process.
int status_to_exit_code(int status);

// Holds the forwarded signals pending (for example while files are written); unblock delivers them.
void block_forwarded_signals();
void unblock_forwarded_signals();

// Replaces this process with the command (PATH search, environment as it is now). Returns only
// on failure: 127 when the command is not found, 126 when it cannot be executed.
Error exec_command(const std::vector<std::string>& command);

// Forks the command into its own process group, forwards signals to that group, reaps every
// child (as PID 1 orphans are re-parented to us) and returns the command's exit status, or
// 128+N when signal N killed it.
Result<int> supervise_command(const std::vector<std::string>& command);

}  // namespace tfboot
