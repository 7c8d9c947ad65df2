// Running the command: plain exec, or supervising it as an init in the manner of tini and
// dumb-init (README: Running the command).
#pragma once

#include <poll.h>

#include <chrono>
#include <csignal>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"

namespace tfboot {

class ChildSet;

// What the job decided for this task: stop the command and end tfboot with `exit_code`.
struct JobOutcome {
  int exit_code = 0;
  std::string reason;  // one line for the log
};

// The supervisor's view of the job's control channel (README: Job supervision).
class JobView {
 public:
  virtual ~JobView() = default;
  virtual void add_poll_fds(std::vector<pollfd>& fds) const = 0;
  virtual std::chrono::steady_clock::time_point next_wakeup() const = 0;
  // Handles what is ready or due; a decision once the job has made one.
  virtual std::optional<JobOutcome> process(const std::vector<pollfd>& fds, std::chrono::steady_clock::time_point now) = 0;
  // Our command ended with `exit_code`; the channel tells the job, within a bounded time.
  virtual void report_exit(int exit_code) = 0;
};

// execvp's argument vector over `strings`, which must outlive it.
std::vector<char*> make_argv(const std::vector<std::string>& strings);
// As a shell does: 127 when the program is missing, 126 for anything else that stops exec.
int exec_failure_code(int error_number);
std::string exec_failure_message(const std::string& program, int error_number);
// A waitpid status as an exit code: the status, or 128+N when signal N ended the process.
int status_to_exit_code(int status);
// write(2) until done; gives up quietly when the descriptor is closed.
void write_all(int fd, const std::string& text);

// Before the command runs nothing has been started and nothing is half-written, so SIGTERM or
// SIGINT ends tfboot at once with 128+N (as PID 1 the kernel ignores signals without a handler,
// hence an explicit one). Installed first thing, so every wait honours them.
Result<void> install_stop_handlers();
// While files are written a stop signal waits; release_stop_signals lets a held one end us.
Result<void> hold_stop_signals();
Result<void> release_stop_signals();

// Default dispositions for every signal and an empty mask: what a command expects to inherit,
// whatever our own parent left us (nohup, runtimes that block signals).
void reset_signal_state();

// Replaces this process with the command (PATH search, exactly `environment`). Returns only on
// failure: 127 when the command is not found, 126 when it cannot be executed.
Error exec_command(const std::vector<std::string>& command, const std::vector<std::string>& environment);

struct InitSettings {
  std::chrono::milliseconds stop_grace{std::chrono::seconds(30)};
  // After the job is done, how long the command may take to end by itself before SIGTERM.
  std::chrono::milliseconds finish_window{std::chrono::seconds(5)};
  JobView* job = nullptr;  // the job's control channel after the start barrier, if any
};

// Blocks until SIGTERM or SIGINT, then returns 0: a finished task that a StatefulSet would
// otherwise restart waits to be deleted. Needs those signals blocked (a ChildSet does that).
int idle_until_stopped();

// Init mode: starts the command in its own process group in `children`, forwards every signal
// but tfboot's own to that group, reaps every child, follows the job's decisions, and returns
// the exit code tfboot ends with (README: Running the command, Job supervision).
Result<int> supervise_command(ChildSet& children, const std::vector<std::string>& command,
                              const std::vector<std::string>& environment, const InitSettings& settings);

}  // namespace tfboot
