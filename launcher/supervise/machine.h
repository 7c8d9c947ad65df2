// The rules of a running job, written once (docs/supervision.md: Job supervision): the first
// failure stops the others; the job is done when its verdict says so, then a finish window,
// SIGTERM, and SIGKILL after --stop-grace; a second stop signal kills; a failure restarts the job
// while restarts remain (JobMonitor decides that, once, for pods and for `tfboot local` alike).
// Pure, as JobMonitor is: events in (a process ended, its process group emptied, a signal, the
// job's verdict, time), actions out (signal these, report a task's end), and the end once
// everything has stopped. supervise/loop.cpp drives it; unit tests drive it through a fake.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "control/protocol/watch.h"

namespace tfboot {

// Why supervision ended: reported with a message (the log's last line) and in startup.json's end
// record.
enum class EndReason {
  command_succeeded,
  command_failed,
  stopped_by_signal,  // a stop signal came to tfboot and was passed on; the command then failed
  job_done,           // the job's coordinator finished (every task, for PyTorch and JAX)
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

// One process the machine watches: which task it belongs to and its name in the log ("rank 3",
// "worker:1 rank 3"; "" for a task's only process in a pod).
struct WatchedProcess {
  std::size_t task = 0;
  std::string name;
};

struct MachineSettings {
  std::chrono::milliseconds stop_grace{std::chrono::seconds(30)};
  std::chrono::milliseconds finish_window{std::chrono::seconds(5)};
  // `tfboot local`: every task of the job is here; a stop signal stops the whole job (SIGKILL after
  // the grace), and the closing line speaks of the job. In a pod the platform owns the grace.
  bool local = false;
  // A job decides after a task's end (a link to the coordinator, or the job of `tfboot local`):
  // a task done early waits for the verdict rather than end on its own.
  bool job_decides = false;
  // A failed task waits for the job's restart (--max-restarts left); else it ends with its status.
  bool may_restart = false;
  int max_restarts = 0;
  bool stop_together = false;  // --stop-together: a task asked to stop ends with a status that is retried
};

// What the machine asks of the world.
struct SupervisorAction {
  enum class Kind {
    signal,              // `signal_number` to each process's group, while the process runs
    signal_leftovers,    // `signal_number` to what an ended process left in its group
    report_exit,         // a task's processes have ended: tell the job (`task`, `status`, `detail`, `rejoins`)
    report_stop_signal,  // a stop signal came to tfboot (--stop-together passes it to every task)
    suspend_self,        // job control: tfboot stops itself until SIGCONT
  };
  Kind kind = Kind::signal;
  std::vector<std::size_t> processes;
  int signal_number = 0;
  std::size_t task = 0;
  int status = 0;
  std::string detail;
  bool rejoins = true;  // false: this tfboot ends whatever the job decides (it was asked to stop)
};

class JobMachine {
 public:
  // `tasks`: the tasks' names ("worker:1"); the first one is the coordinator in `tfboot local`.
  JobMachine(std::vector<std::string> tasks, std::vector<WatchedProcess> processes, MachineSettings settings);

  // A process ended with `status` (128+N for signal N); `detail`: what it left to say when it
  // failed (a framework's error file), or "".
  void on_process_exit(std::size_t process, int status, const std::string& detail, Instant now);
  // Nothing is left in the ended process's group (or it was never asked about).
  void on_group_empty(std::size_t process);
  void on_signal(int signal_number, Instant now);
  // The job's verdict (from the coordinator, or the job of `tfboot local`); the first one counts.
  void on_job_event(const JobEvent& event, Instant now);
  // No verdict will come after this task's report: the job's link ended or was inert.
  void on_no_verdict();
  void on_time(Instant now);

  std::vector<SupervisorAction> take_actions();
  // When on_time must next run; Instant::max() when nothing is scheduled.
  Instant next_deadline() const;
  // The ended processes whose groups may still hold something the command left behind.
  std::vector<std::size_t> groups_to_watch() const;
  // Every process and what it left has ended, and the job's verdict is in where one is awaited.
  bool ended() const;
  // Once ended(): how the supervision ends, and the closing line for the log.
  SupervisionEnd end() const;

 private:
  struct Process {
    WatchedProcess watched;
    std::optional<int> status;
    bool group_empty = false;
    int sent = 0;  // the last signal tfboot sent it to stop it
    Instant kill_leftovers_at = Instant::max();
    bool leftovers_killed = false;
  };
  struct Task {
    std::string name;
    std::optional<std::size_t> failed_process;  // the first process that failed decides the task's status
    std::string detail;
    bool reported = false;
  };

  std::string stop_processes(const std::vector<std::size_t>& ids, int signal_number);
  void stop_running(int signal_number, Instant now, bool kill_after_grace);
  void stop_task(std::size_t task, Instant now);
  void task_ended(std::size_t task);
  void act(SupervisorAction action) { actions_.push_back(std::move(action)); }
  std::vector<std::size_t> running(std::optional<std::size_t> task = std::nullopt) const;
  bool task_running(std::size_t task) const;
  int task_status(std::size_t task) const;
  std::string failure_text(std::size_t task) const;
  std::string what() const;
  bool awaits_verdict() const;
  SupervisionEnd local_end() const;
  SupervisionEnd pod_end() const;

  std::vector<Task> tasks_;
  std::vector<Process> processes_;
  MachineSettings settings_;
  std::vector<SupervisorAction> actions_;
  Instant terminate_at_ = Instant::max();  // the finish window's end: SIGTERM to what runs then
  Instant kill_at_ = Instant::max();       // SIGKILL to what still runs
  int stop_requests_ = 0;
  int stop_signal_ = 0;          // the first stop signal that came to tfboot
  std::optional<JobEvent> verdict_;
  bool verdict_after_failure_ = false;  // the verdict came after this task's own failure or end
  bool verdict_after_signal_ = false;   // the verdict came after a stop signal
  bool no_verdict_ = false;
  bool stopped_with_the_job_ = false;  // another task's stop signal was passed to the command
  std::optional<int> first_nonzero_;   // the first non-zero status of any process
};

}  // namespace tfboot
