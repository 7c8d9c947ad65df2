// The one loop that drives the job machine (machine.h) over the command's processes and the job:
// init mode in a pod, `tfboot local`, and a one-task job alike (docs/supervision.md: Running the
// command, Job supervision).
#pragma once

#include <poll.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/error.h"
#include "control/protocol/watch.h"
#include "process/child_set.h"
#include "supervise/machine.h"

namespace tfboot {

// One process of the command: its argv, environment and output label, and its name in the log
// ("rank 3"; "" when it is the only one).
struct CommandProcess {
  ChildSpec spec;
  std::string name;
};

// The job a supervisor tells of its tasks' ends and hears the verdict from: a link to the other
// pods' tfboot, or a job decided here (LocalJob).
class Job {
 public:
  virtual ~Job() = default;
  virtual void add_poll_fds(std::vector<pollfd>&) const {}
  virtual Instant next_wakeup() const { return Instant::max(); }
  // What is ready in `fds` or due at `now`; the job's verdict among the events, at most once.
  virtual std::vector<JobEvent> process(const std::vector<pollfd>& fds, Instant now) = 0;
  virtual void report_exit(std::size_t task, int status, const std::string& detail, bool rejoins) = 0;
  virtual void report_stop_signal(int) {}
  // After a report: a verdict is still to come.
  virtual bool verdict_pending() const = 0;
};

// The job decided in this tfboot by the same JobMonitor a coordinator runs: `tfboot local`'s
// tasks, or a job of one task (whose --max-restarts then applies as to any other job).
class LocalJob final : public Job {
 public:
  // `tasks`: the coordinator first.
  LocalJob(const std::vector<JobMember>& tasks, JobRules rules);
  std::vector<JobEvent> process(const std::vector<pollfd>& fds, Instant now) override;
  void report_exit(std::size_t task, int status, const std::string& detail, bool rejoins) override;
  bool verdict_pending() const override { return !monitor_.decided() || !events_.empty(); }

 private:
  std::vector<JobMember> tasks_;
  JobMonitor monitor_;
  std::vector<JobEvent> events_;
};

// What the machine's actions do to the command's processes: the loop signals process groups
// (ChildSet); the unit tests imitate them (tests/unit/supervise_test.cpp), as ninja's do its
// command runner.
class ProcessControl {
 public:
  virtual ~ProcessControl() = default;
  virtual void signal(const std::vector<std::size_t>& processes, int signal_number) = 0;
  // What `process` left in its group gets the signal; false when its group is already empty.
  virtual bool signal_leftovers(std::size_t process, int signal_number) = 0;
  virtual void suspend_self() = 0;
};

// Performs the machine's actions, and those they lead to (a report answered at once by a job
// decided here), until it has none. `job` may be null: no job to report to.
void perform_actions(JobMachine& machine, ProcessControl& processes, Job* job, Instant now);

struct SupervisorSettings {
  MachineSettings machine;
  // Each task's name ("worker:1"), and each process's task and name, in `processes` order.
  std::vector<std::string> tasks;
  std::vector<WatchedProcess> watched;
  // What a failed process left to say, read once it has ended: one line, or "". `last_words`: the
  // process's own (ChildSet::last_words), which a framework's error file may better. Unset: nothing.
  std::function<std::string(std::size_t process, int status, const std::string& last_words)> failure_detail;
};

// Starts each process in a process group of its own in `children` and follows the job machine
// until every process and what it left in its group has ended and the job's verdict is in. The
// job (may be null) is served in every phase: heartbeats flow while leftovers are waited for.
Result<SupervisionEnd> supervise_processes(ChildSet& children, const std::vector<CommandProcess>& processes, Job* job,
                                           const SupervisorSettings& settings);

// As PID 1 or a subreaper, before the command starts again and before `tfboot local` exits: what
// the last run left outside its process groups (a daemon started with setsid, now our child) gets
// SIGTERM, SIGKILL after `grace`, and is reaped, so that none holds a port or a device into the
// next run. Processes we never started (a `kubectl exec` session) are not ours and are left alone.
void end_orphans(std::chrono::milliseconds grace);

}  // namespace tfboot
