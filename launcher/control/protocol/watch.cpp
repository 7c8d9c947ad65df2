// The job after the start: the coordinator's JobMonitor and a task's CoordinatorWatch.
#include "control/protocol/watch.h"

#include <algorithm>
#include <cstring>

#include "base/text.h"

namespace tfboot {
namespace {

std::string stop_together_message(const std::string& task, int signal_number) {
  return task + " was asked to stop (" + signal_name(signal_number) + "): every task stops together";
}

}  // namespace

std::string describe_status(int status) {
  if (status < 0) return "lost";
  if (status > exit_code::signal_base && status < exit_code::signal_base + 65) {
    const char* name = sigabbrev_np(status - exit_code::signal_base);
    return "signal " + std::string(name ? "SIG" + std::string(name) : std::to_string(status - exit_code::signal_base)) +
           " (status " + std::to_string(status) + ")";
  }
  return "status " + std::to_string(status);
}

JobMonitor::JobMonitor(JobMember self, const std::vector<Watched>& tasks, std::chrono::milliseconds silent_after, Instant now,
                       JobRules rules)
    : self_(self), silent_after_(silent_after), rules_(rules) {
  for (const auto& task : tasks) {
    if (tasks_.emplace(task.task, State{task.supervised, false, false, now}).second && task.supervised) ++running_;
  }
  if (running_ > 0) next_deadline_ = now + silent_after_;
}

// The first failure decides: a restart while the job has restarts left, else the stop.
JobDecision JobMonitor::fail(const JobMember& task, int status, const std::string& message, bool restartable) {
  if (decided_) return {};
  decided_ = true;
  if (restartable && rules_.restarts < rules_.max_restarts) {
    const int count = rules_.restarts + 1;
    JobEvent event{JobEventKind::restart, task.text(), status, message, count};
    return {{event}, Restart{task, status, message, count}};
  }
  JobEvent event{JobEventKind::task_failed, task.text(), status, message};
  return {{event}, Stop{task, status, message}};
}

// A preempted job is not restarted in place: its pods are going away.
JobDecision JobMonitor::preempt(const JobMember& task, int signal_number) {
  if (decided_ || !rules_.stop_together) return {};
  decided_ = true;
  return {{JobEvent{JobEventKind::preempt, task.text(), signal_number, stop_together_message(task.text(), signal_number)}},
          Preempt{task, signal_number}};
}

JobDecision JobMonitor::on_own_stop_signal(int signal_number) { return preempt(self_, signal_number); }

JobDecision JobMonitor::on_message(const JobMember& from, const Message& message, Instant now) {
  auto it = tasks_.find(from);
  if (it == tasks_.end()) return {};
  it->second.last_heard = now;
  if (const Preempt* stop = std::get_if<Preempt>(&message)) return preempt(from, stop->signal);
  const Exit* exit = std::get_if<Exit>(&message);
  if (!exit) return {};
  return on_task_exit(from, exit->status, exit->detail);
}

JobDecision JobMonitor::on_task_exit(const JobMember& task, int status, const std::string& detail, bool restartable) {
  auto it = tasks_.find(task);
  if (it == tasks_.end() || it->second.exited) return {};
  it->second.exited = true;
  if (it->second.supervised) --running_;
  // A task other than the coordinator finishing is normal (an evaluator, a worker done early).
  if (status == 0) return own_done_ ? done_if_every_task_is() : JobDecision{};
  return fail(task, status, task.text() + " failed with " + describe_status(status) + (detail.empty() ? "" : ": " + detail), restartable);
}

JobDecision JobMonitor::on_closed(const JobMember& from, const std::string& why, Instant) {
  auto it = tasks_.find(from);
  if (it == tasks_.end() || it->second.gone) return {};
  it->second.gone = true;
  if (it->second.exited || !it->second.supervised) return {};
  return fail(from, -1, from.text() + " was lost: " + why);
}

JobDecision JobMonitor::on_tick(Instant now) {
  if (decided_ || now < next_deadline_) return {};
  next_deadline_ = Instant::max();
  JobDecision decision;
  for (auto& [task, state] : tasks_) {
    if (!watched_for_silence(state)) continue;
    if (now - state.last_heard <= silent_after_) {
      next_deadline_ = std::min(next_deadline_, state.last_heard + silent_after_);
      continue;
    }
    state.gone = true;
    if (decision.events.empty()) decision = fail(task, -1, task.text() + " was lost: silent for " + seconds_text(now - state.last_heard));
  }
  return decision;
}

JobDecision JobMonitor::on_own_exit(int status, const std::string& detail, bool restartable) {
  if (decided_) return {};
  if (status != 0) {
    return fail(self_, status, self_.text() + " failed with " + describe_status(status) + (detail.empty() ? "" : ": " + detail),
                restartable);
  }
  if (rules_.every_task_must_finish) {
    own_done_ = true;
    return done_if_every_task_is();
  }
  decided_ = true;
  return {{}, Done{}};
}

// Exec-mode tasks cannot say when they end: only supervised ones are waited for.
JobDecision JobMonitor::done_if_every_task_is() {
  if (running_ > 0) return {};
  decided_ = true;
  return {{JobEvent{JobEventKind::job_done, "every task", 0, ""}}, Done{}};
}

Instant JobMonitor::next_deadline() const { return decided_ ? Instant::max() : next_deadline_; }

CoordinatorWatch::CoordinatorWatch(JobMember coordinator, bool active, std::chrono::milliseconds silent_after, Instant now)
    : coordinator_(coordinator), active_(active), silent_after_(silent_after), last_heard_(now) {}

std::optional<JobEvent> CoordinatorWatch::decide(JobEvent event) {
  if (decided_ || !active_) return std::nullopt;
  decided_ = true;
  return event;
}

std::optional<JobEvent> CoordinatorWatch::on_message(const Message& message, Instant now) {
  last_heard_ = now;
  if (std::holds_alternative<Done>(message)) {
    return decide({JobEventKind::job_done, coordinator_.text(), 0, "the coordinator " + coordinator_.text() + " finished: the job is done"});
  }
  if (const Stop* stop = std::get_if<Stop>(&message)) return decide({JobEventKind::task_failed, stop->task.text(), stop->status, stop->message});
  if (const Restart* restart = std::get_if<Restart>(&message)) {
    return decide({JobEventKind::restart, restart->task.text(), restart->status, restart->message, restart->count});
  }
  if (const Preempt* stop = std::get_if<Preempt>(&message)) {
    return decide({JobEventKind::preempt, stop->task.text(), stop->signal, stop_together_message(stop->task.text(), stop->signal)});
  }
  return std::nullopt;
}

std::optional<JobEvent> CoordinatorWatch::on_closed(const std::string& why) {
  return decide({JobEventKind::coordinator_lost, coordinator_.text(), -1, "the coordinator " + coordinator_.text() + " was lost: " + why});
}

std::optional<JobEvent> CoordinatorWatch::on_tick(Instant now) {
  if (now - last_heard_ <= silent_after_) return std::nullopt;
  return decide({JobEventKind::coordinator_lost, coordinator_.text(), -1,
                 "the coordinator " + coordinator_.text() + " was lost: silent for " + seconds_text(now - last_heard_)});
}

Instant CoordinatorWatch::next_deadline() const { return decided_ || !active_ ? Instant::max() : last_heard_ + silent_after_; }

}  // namespace tfboot
