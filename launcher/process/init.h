// Init mode: supervising the command in the manner of tini and dumb-init, and following the job's
// decisions (docs/supervision.md: Running the command, Job supervision).
#pragma once

#include <poll.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/error.h"
#include "process/child_set.h"

namespace tfboot {

// What the job decided for this task: stop the command, then end tfboot with `exit_code` (end),
// start the command again after a fresh start barrier (restart), or end as the command does,
// having passed it the stop signal another task got (stop_together).
enum class JobAction { end, restart, stop_together };
struct JobOutcome {
  int exit_code = 0;
  std::string reason;       // one line for the log
  std::string failed_task;  // the task whose failure (or loss) stopped or restarts the job ("worker:1"), or ""
  JobAction action = JobAction::end;
};

// The supervisor's view of the job's control channel (docs/supervision.md: Job supervision).
class JobView {
 public:
  virtual ~JobView() = default;
  virtual void add_poll_fds(std::vector<pollfd>& fds) const = 0;
  virtual Instant next_wakeup() const = 0;
  // Handles what is ready or due; a decision once the job has made one.
  virtual std::optional<JobOutcome> process(const std::vector<pollfd>& fds, Instant now) = 0;
  // Our command ended with `exit_code`; the channel tells the job, within a bounded time.
  // `detail`: what failed, when known ("rank 3 on pod-1: RuntimeError: ..."), else "".
  // `rejoins`: false when this tfboot ends whatever the job decides (it was asked to stop), so
  // its failure must not restart the job.
  virtual void report_exit(int exit_code, const std::string& detail, bool rejoins) = 0;
  // After report_exit: the job is not decided until the other tasks are done (PyTorch, JAX on the
  // coordinator), or, after a failure, until it says restart or stop.
  virtual bool awaits_other_tasks() const = 0;
  // A failure of the command restarts the job in place (--max-restarts) rather than ending it.
  virtual bool may_restart() const = 0;
  // A stop signal came to tfboot and was passed on: the job may pass it to every task (--stop-together).
  virtual void report_stop_signal(int signal_number) = 0;
  // --stop-together is on for the job: a task stopped by a signal ends with a retryable status.
  virtual bool stops_together() const = 0;
  // Delivers what is queued to the job and closes the channel, within a bounded time.
  virtual void finish() = 0;
};

struct InitSettings {
  std::chrono::milliseconds stop_grace{std::chrono::seconds(30)};
  JobView* job = nullptr;  // the job's control channel after the start barrier, if any
  // What a failed process left to say (a framework's error file), read once it has ended: one
  // line, or "". Unset: nothing to read.
  std::function<std::string(std::size_t process, int status)> failure_detail;
};

// One process of the command: its argv, environment and output label, and its name in the log
// ("rank 3"; "" when it is the only one).
struct CommandProcess {
  ChildSpec spec;
  std::string name;
};

// Why supervision ended: decided on here, reported with `message` (the log's last line) and in
// startup.json's end record.
enum class EndReason {
  command_succeeded,
  command_failed,
  stopped_by_signal,  // a stop signal came to tfboot and was passed on; the command then failed
  job_done,           // the job's coordinator finished
  job_failed,         // another task failed or was lost
  restarting,         // the job restarts in place: the command starts again after a fresh barrier
  stopped_together,   // another task's stop signal was passed on (--stop-together); ends as the command did
};
// "command_succeeded", "job_failed", ...
std::string_view to_string(EndReason reason);

struct SupervisionEnd {
  int exit_code = 0;  // what tfboot exits with
  EndReason reason = EndReason::command_succeeded;
  std::string message;
  std::string failed_task;  // job_failed, restarting: the task whose failure (or loss) decided, or ""
};

// As PID 1 only, before the command starts again: every process the last run left in the
// container (a daemon it started with setsid, outside its process group) gets SIGTERM, SIGKILL
// after `grace`, and is reaped, so that none holds a port or a device into the next run.
void end_stray_processes(std::chrono::milliseconds grace);

// Init mode: starts each process of the command in a process group of its own in `children`,
// forwards every signal but tfboot's own to them, reaps every child, follows the job's decisions,
// and returns how the task ended, with the exit code tfboot ends with (docs/supervision.md: Running the
// command, Job supervision).
// The processes are one task: the first to fail fails it and the others are stopped; it succeeds
// when all of them do.
Result<SupervisionEnd> supervise_command(ChildSet& children, const std::vector<CommandProcess>& processes,
                                         const InitSettings& settings);

}  // namespace tfboot
