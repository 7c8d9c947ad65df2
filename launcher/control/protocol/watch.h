// The job after the start, pure: the coordinator's JobMonitor (task exits and silences in,
// events and broadcasts out) and a task's CoordinatorWatch. Time is passed in; control/link.cpp
// feeds them from the sockets.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "control/protocol/messages.h"

namespace tfboot {

// restart: every task stops its command and rejoins (--max-restarts); preempt: a stop signal came
// to one task and goes to every task's command (--stop-together).
enum class JobEventKind { job_done, task_failed, coordinator_lost, restart, preempt };
struct JobEvent {
  JobEventKind kind = JobEventKind::job_done;
  std::string task;  // the task that failed, was asked to stop, or the coordinator
  int status = 0;    // the failed task's status; -1 when it was lost; preempt: the signal
  std::string message;
  int restart = 0;   // restart: the job's restarts with this one
};

// The job's rules after the start, as the coordinator has them.
struct JobRules {
  // The own command's success ends the job only once every supervised task has exited 0 too
  // (PyTorch, JAX); else at once (TensorFlow's chief).
  bool every_task_must_finish = false;
  int restarts = 0;      // made so far
  int max_restarts = 0;  // a failure with restarts left restarts the job instead of stopping it
  bool stop_together = false;
};

struct JobDecision {
  std::vector<JobEvent> events;        // for our own supervisor
  std::optional<Message> broadcast;    // for every other task
};

// The coordinator's watch over the job: task exits and silences in, events and broadcasts out.
// The first failure or the own command's end decides; later news is only logged by the caller.
class JobMonitor {
 public:
  struct Watched {
    JobMember task;
    bool supervised;  // exec-mode tasks close their connection at exec: not a failure
  };
  JobMonitor(JobMember self, const std::vector<Watched>& tasks, std::chrono::milliseconds silent_after, Instant now,
             JobRules rules = {});
  JobDecision on_message(const JobMember& from, const Message& message, Instant now);
  // A task's command ended with `status`. `restartable`: false when that task's tfboot ends
  // whatever the job decides (asked to stop), so its failure stops the job rather than restart it.
  JobDecision on_task_exit(const JobMember& task, int status, const std::string& detail, bool restartable = true);
  JobDecision on_closed(const JobMember& from, const std::string& why, Instant now);
  JobDecision on_tick(Instant now);
  // `restartable`: false when the coordinator's tfboot ends anyway (asked to stop): no restart
  // could gather the job again without it.
  JobDecision on_own_exit(int status, const std::string& detail = "", bool restartable = true);
  // A stop signal came to the coordinator's own tfboot (with stop_together: every task gets it).
  JobDecision on_own_stop_signal(int signal_number);
  // When on_tick must next run; time_point::max() when nothing is watched.
  Instant next_deadline() const;
  bool decided() const { return decided_; }

 private:
  struct State {
    bool supervised;
    bool exited = false;
    bool gone = false;
    Instant last_heard;
  };
  JobDecision fail(const JobMember& task, int status, const std::string& message, bool restartable = true);
  JobDecision preempt(const JobMember& task, int signal_number);
  JobDecision done_if_every_task_is();
  bool watched_for_silence(const State& state) const { return !state.gone && !state.exited && state.supervised; }

  JobMember self_;
  std::chrono::milliseconds silent_after_;
  std::map<JobMember, State> tasks_;
  // Heartbeats move every deadline forward, so the earliest one is only looked for when the one
  // last found is due: a look at every task every few seconds, not at every message.
  Instant next_deadline_ = Instant::max();
  std::size_t running_ = 0;  // supervised tasks that have not exited
  bool decided_ = false;
  JobRules rules_;
  bool own_done_ = false;
};

// A task's watch over the coordinator after the start.
class CoordinatorWatch {
 public:
  // `active` is false when the coordinator does not keep watching (it exec'd its command).
  CoordinatorWatch(JobMember coordinator, bool active, std::chrono::milliseconds silent_after, Instant now);
  std::optional<JobEvent> on_message(const Message& message, Instant now);
  std::optional<JobEvent> on_closed(const std::string& why);
  std::optional<JobEvent> on_tick(Instant now);
  Instant next_deadline() const;
  bool decided() const { return decided_; }

 private:
  std::optional<JobEvent> decide(JobEvent event);

  JobMember coordinator_;
  bool active_;
  std::chrono::milliseconds silent_after_;
  Instant last_heard_;
  bool decided_ = false;
};

// "status 1", "signal 9 (status 137)", "lost".
std::string describe_status(int status);

}  // namespace tfboot
