// The rules of a running job, written once (machine.h).
#include "supervise/machine.h"

#include <signal.h>

#include <algorithm>

#include "base/error.h"
#include "base/log.h"
#include "base/text.h"

namespace tfboot {
namespace {

bool is_stop(int signal_number) { return signal_number == SIGTERM || signal_number == SIGINT; }

bool is_job_control_stop(int signal_number) {
  return signal_number == SIGTSTP || signal_number == SIGTTIN || signal_number == SIGTTOU;
}

std::string restart_text(int count, int max) { return "restart " + std::to_string(count) + " of " + std::to_string(max); }

}  // namespace

std::string_view to_string(EndReason reason) {
  switch (reason) {
    case EndReason::command_succeeded: return "command_succeeded";
    case EndReason::command_failed: return "command_failed";
    case EndReason::stopped_by_signal: return "stopped_by_signal";
    case EndReason::job_done: return "job_done";
    case EndReason::job_failed: return "job_failed";
    case EndReason::restarting: return "restarting";
    case EndReason::stopped_together: return "stopped_together";
  }
  return "command_failed";
}

JobMachine::JobMachine(std::vector<std::string> tasks, std::vector<WatchedProcess> processes, MachineSettings settings)
    : settings_(settings) {
  for (std::string& name : tasks) tasks_.push_back(Task{std::move(name), std::nullopt, "", false});
  for (WatchedProcess& process : processes) processes_.push_back(Process{std::move(process), std::nullopt});
}

std::vector<std::size_t> JobMachine::running(std::optional<std::size_t> task) const {
  std::vector<std::size_t> ids;
  for (std::size_t i = 0; i < processes_.size(); ++i) {
    if (!processes_[i].status && (!task || processes_[i].watched.task == *task)) ids.push_back(i);
  }
  return ids;
}

bool JobMachine::task_running(std::size_t task) const { return !running(task).empty(); }

int JobMachine::task_status(std::size_t task) const {
  const auto& failed = tasks_[task].failed_process;
  return failed ? *processes_[*failed].status : exit_code::ok;
}

std::string JobMachine::what() const { return processes_.size() == 1 ? "the command" : "the command's processes"; }

// "worker:1 rank 3 exited with status 1: rank 3 on host: RuntimeError: ..."
std::string JobMachine::failure_text(std::size_t task) const {
  const Task& failed = tasks_[task];
  if (!failed.failed_process) return failed.name + " failed";
  const Process& process = processes_[*failed.failed_process];
  return process.watched.name + " exited with status " + std::to_string(*process.status) +
         (failed.detail.empty() ? "" : ": " + failed.detail);
}

// Sends `signal_number` to each of `ids` as tfboot's own stop (its end then reads "stopped by
// tfboot"); returns their names for the log.
std::string JobMachine::stop_processes(const std::vector<std::size_t>& ids, int signal_number) {
  std::string names;
  for (std::size_t id : ids) {
    names += (names.empty() ? "" : ", ") + processes_[id].watched.name;
    processes_[id].sent = signal_number;
  }
  if (!ids.empty()) act({.kind = SupervisorAction::Kind::signal, .processes = ids, .signal_number = signal_number});
  return names;
}

void JobMachine::stop_running(int signal_number, Instant now, bool kill_after_grace) {
  const std::vector<std::size_t> ids = running();
  terminate_at_ = Instant::max();
  if (ids.empty()) return;
  const std::string names = stop_processes(ids, signal_number);
  if (kill_after_grace) kill_at_ = std::min(kill_at_, now + settings_.stop_grace);
  if (settings_.local) {
    log::info("waiting up to {} (--stop-grace) for {} to end after {}; Ctrl-C again to kill now",
              seconds_text(settings_.stop_grace), names, signal_name(signal_number));
  } else {
    log::info("stopping {}: {}, SIGKILL after {}", what(), signal_name(signal_number), seconds_text(settings_.stop_grace));
  }
}

void JobMachine::stop_task(std::size_t task, Instant now) {
  const std::vector<std::size_t> ids = running(task);
  if (ids.empty()) return;
  stop_processes(ids, SIGTERM);
  kill_at_ = std::min(kill_at_, now + settings_.stop_grace);
}

void JobMachine::on_process_exit(std::size_t id, int status, const std::string& detail, Instant now) {
  Process& process = processes_[id];
  if (process.status) return;
  process.status = status;
  const bool stopped_by_us = process.sent != 0 && status == exit_code::signal_base + process.sent;
  const std::string how = stopped_by_us ? "stopped by tfboot (" + signal_name(process.sent) + ")" : "exited with status " + std::to_string(status);
  if (settings_.local) log::info("[{}] {}", process.watched.name, how);
  else if (processes_.size() > 1) log::info("{} {}", process.watched.name, stopped_by_us ? how + "; status " + std::to_string(status) : how);
  else log::info("command {}", stopped_by_us ? how + "; status " + std::to_string(status) : how);
  if (status != exit_code::ok && !first_nonzero_) first_nonzero_ = status;
  // What the process left in its group gets SIGTERM now, SIGKILL after the grace: every group at
  // once, and the job's channel keeps its heartbeats meanwhile.
  act({.kind = SupervisorAction::Kind::signal_leftovers, .processes = {id}, .signal_number = SIGTERM});
  process.kill_leftovers_at = now + settings_.stop_grace;

  const std::size_t task_id = process.watched.task;
  Task& task = tasks_[task_id];
  // The first failure is the task's; one after the job's verdict is part of the job's end.
  if (status != exit_code::ok && !task.failed_process && !verdict_) {
    task.failed_process = id;
    task.detail = detail;
    if (settings_.local) {
      log::error("[{}] failed{}{}; stopping the other tasks", process.watched.name, detail.empty() ? "" : ": ", detail);
    } else if (task_running(task_id)) {
      log::error("{} failed{}{}; stopping the other processes of the task", process.watched.name, detail.empty() ? "" : ": ", detail);
    }
    stop_task(task_id, now);
  }
  if (!task_running(task_id)) task_ended(task_id);
}

void JobMachine::task_ended(std::size_t task_id) {
  Task& task = tasks_[task_id];
  const int status = task_status(task_id);
  if (!settings_.local && processes_.size() > 1) {
    log::info("the command's {} processes ended; the task's status is {}", processes_.size(), status);
  }
  if (task.reported || verdict_) return;
  task.reported = true;
  const bool rejoins = stop_requests_ == 0;
  act({.kind = SupervisorAction::Kind::report_exit, .task = task_id, .status = status, .detail = task.detail, .rejoins = rejoins});
  if (!settings_.local && awaits_verdict()) {
    log::info("{}", status == exit_code::ok  ? "this task is done; waiting for the job's outcome (the others' end, or a failure)"
                    : settings_.may_restart ? "this task failed; waiting for the job to restart or stop (--max-restarts)"
                                            : "this task failed; waiting for the job's verdict (the job may be done already)");
  }
}

void JobMachine::on_group_empty(std::size_t id) {
  processes_[id].group_empty = true;
  processes_[id].kill_leftovers_at = Instant::max();
}

void JobMachine::on_signal(int signal_number, Instant now) {
  const bool stop = is_stop(signal_number);
  if (stop && ++stop_requests_ >= 2) {
    const std::string names = stop_processes(running(), SIGKILL);
    if (settings_.local) log::warn("second stop signal: killing {} now", names);
    else log::warn("second stop signal: killing {} (each process group)", what());
    for (std::size_t id : groups_to_watch()) {
      act({.kind = SupervisorAction::Kind::signal_leftovers, .processes = {id}, .signal_number = SIGKILL});
    }
    return;
  }
  if (stop) {
    if (stop_requests_ == 1) stop_signal_ = signal_number;
    if (running().empty()) {
      log::info("{}: no longer waiting for the other tasks", signal_name(signal_number));
      return;
    }
    if (settings_.local) {
      log::info("{}: stopping all tasks", signal_name(signal_number));
      stop_running(signal_number, now, true);
      return;
    }
    // A drained node or a reclaimed spot instance: with --stop-together every rank hears it now,
    // and can save the same step, rather than failing on a missing peer later.
    if (!verdict_) act({.kind = SupervisorAction::Kind::report_stop_signal, .signal_number = signal_number});
    // The whole job deleted: the kubelet's signal may come after the job's. The command has it
    // already; a second one could cut its save short.
    if (stopped_with_the_job_) {
      log::info("{}: the command has it already (the job's stop)", signal_name(signal_number));
      return;
    }
    // Passed on, with no SIGKILL of ours after it: terminationGracePeriodSeconds is the user's
    // choice of how long a checkpoint may take.
    log::info("passing {} to {}", signal_name(signal_number), what());
    act({.kind = SupervisorAction::Kind::signal, .processes = running(), .signal_number = signal_number});
    return;
  }
  // Job control as dumb-init does it in its default (setsid) mode: the command's group has no
  // terminal, where SIGTSTP, SIGTTIN and SIGTTOU may be ignored or caught, so it gets SIGSTOP,
  // which it cannot refuse; then we stop too, until SIGCONT resumes us and is passed on.
  if (is_job_control_stop(signal_number)) {
    log::info("{}: stopping {} (SIGSTOP) and tfboot until SIGCONT", signal_name(signal_number), what());
    act({.kind = SupervisorAction::Kind::signal, .processes = running(), .signal_number = SIGSTOP});
    act({.kind = SupervisorAction::Kind::suspend_self});
    return;
  }
  if (!settings_.local) log::info("passing {} to {}", signal_name(signal_number), what());
  act({.kind = SupervisorAction::Kind::signal, .processes = running(), .signal_number = signal_number});
}

namespace {

// The verdict as one line, for a task in a pod.
std::string verdict_text(const JobEvent& event, int max_restarts) {
  switch (event.kind) {
    case JobEventKind::job_done: return "the job is done: " + event.task + " finished";
    case JobEventKind::restart: return "restarting the job in place (" + restart_text(event.restart, max_restarts) + "): " + event.message;
    case JobEventKind::preempt: return event.message;
    case JobEventKind::task_failed:
    case JobEventKind::coordinator_lost: break;
  }
  return "stopping: " + event.message;
}

}  // namespace

void JobMachine::on_job_event(const JobEvent& event, Instant now) {
  if (verdict_) return;  // the first verdict counts
  verdict_ = event;
  verdict_after_signal_ = stop_requests_ > 0;
  bool failed = false;
  bool reported = true;
  for (const Task& task : tasks_) {
    failed = failed || task.failed_process.has_value();
    reported = reported && task.reported;
  }
  verdict_after_failure_ = failed || reported;
  if (settings_.local) {
    if (event.kind == JobEventKind::job_done) {
      if (running().empty()) return;
      log::info("[{}] is done, and so is the job: the other tasks end within {}", event.task, seconds_text(settings_.finish_window));
      terminate_at_ = std::min(terminate_at_, now + settings_.finish_window);
      return;
    }
    // After the user's stop signal the tasks have it already, with SIGKILL after the grace.
    if (stop_requests_ == 0) stop_running(SIGTERM, now, true);
    return;
  }
  const std::string text = verdict_text(event, settings_.max_restarts);
  if (verdict_after_failure_) {
    // This task ended or failed first: the verdict only says how it ends (a restart, the job done).
    if (event.kind == JobEventKind::restart || event.kind == JobEventKind::task_failed || event.kind == JobEventKind::coordinator_lost) {
      log::error("{}{}", failed ? "" : "the job failed after this task was done: ", text);
    } else {
      log::info("{}", text);
    }
    return;
  }
  if (event.kind == JobEventKind::preempt) {
    log::warn("{}", text);
    if (stop_requests_ > 0) return;  // this task's own stop signal: passed on already
    stopped_with_the_job_ = true;
    stop_running(SIGTERM, now, true);
    return;
  }
  if (event.kind == JobEventKind::job_done) {
    // The command gets the finish window to end by itself: a worker of a MultiWorkerMirroredStrategy
    // job finishes the same step as the chief.
    log::info("{}", text);
    terminate_at_ = std::min(terminate_at_, now + settings_.finish_window);
    return;
  }
  log::error("{}", text);
  stop_running(SIGTERM, now, true);
}

void JobMachine::on_no_verdict() { no_verdict_ = true; }

void JobMachine::on_time(Instant now) {
  if (now >= terminate_at_) stop_running(SIGTERM, now, true);
  if (now >= kill_at_) {
    kill_at_ = Instant::max();
    std::vector<std::size_t> ids = running();
    if (!ids.empty()) {
      const std::string names = stop_processes(ids, SIGKILL);
      if (settings_.local) log::warn("killing {} (SIGKILL): still running {} after the stop", names, seconds_text(settings_.stop_grace));
      else log::warn("{} did not stop within --stop-grace: killing {}", what(), processes_.size() == 1 ? "its process group" : "their process groups");
    }
  }
  for (std::size_t id = 0; id < processes_.size(); ++id) {
    Process& process = processes_[id];
    if (!process.status || process.group_empty || now < process.kill_leftovers_at) continue;
    if (!process.leftovers_killed) {
      log::warn("processes that {} left in its group still run after the grace period: SIGKILL",
                process.watched.name.empty() ? std::string("the command") : process.watched.name);
      act({.kind = SupervisorAction::Kind::signal_leftovers, .processes = {id}, .signal_number = SIGKILL});
      process.leftovers_killed = true;
      process.kill_leftovers_at = now + std::chrono::seconds(1);  // SIGKILL is not refused; reaping may lag
      continue;
    }
    log::warn("processes that {} left are still there 1 s after SIGKILL; going on without them",
              process.watched.name.empty() ? std::string("the command") : process.watched.name);
    on_group_empty(id);
  }
}

std::vector<SupervisorAction> JobMachine::take_actions() { return std::exchange(actions_, {}); }

Instant JobMachine::next_deadline() const {
  Instant next = std::min(terminate_at_, kill_at_);
  for (const Process& process : processes_) next = std::min(next, process.kill_leftovers_at);
  return next;
}

std::vector<std::size_t> JobMachine::groups_to_watch() const {
  std::vector<std::size_t> ids;
  for (std::size_t i = 0; i < processes_.size(); ++i) {
    if (processes_[i].status && !processes_[i].group_empty) ids.push_back(i);
  }
  return ids;
}

bool JobMachine::awaits_verdict() const {
  if (!settings_.job_decides || verdict_ || no_verdict_ || stop_requests_ > 0) return false;
  for (std::size_t task = 0; task < tasks_.size(); ++task) {
    if (!tasks_[task].reported) return false;
  }
  // A failed task waits too, restarts left or not: the coordinator answers every report at once
  // (the job's stop, a restart, or the job already done, as when a trainer fails because the
  // coordinator it talked to has just finished); a lost link ends the wait.
  return true;
}

bool JobMachine::ended() const {
  for (const Process& process : processes_) {
    if (!process.status || !process.group_empty) return false;
  }
  return !awaits_verdict();
}

SupervisionEnd JobMachine::end() const { return settings_.local ? local_end() : pod_end(); }

SupervisionEnd JobMachine::local_end() const {
  const std::string stop_text = stop_signal_ ? "stopped by " + signal_name(stop_signal_) : "";
  if (stop_requests_ > 0 && (!verdict_ || verdict_after_signal_)) {
    return {exit_code::signal_base + stop_signal_, EndReason::stopped_by_signal, stop_text};
  }
  if (!verdict_) {
    const int status = first_nonzero_.value_or(exit_code::ok);
    return {status, status == exit_code::ok ? EndReason::command_succeeded : EndReason::command_failed, "the tasks ended"};
  }
  std::size_t failed = 0;
  for (std::size_t task = 0; task < tasks_.size(); ++task) {
    if (tasks_[task].name == verdict_->task) failed = task;
  }
  switch (verdict_->kind) {
    case JobEventKind::job_done: return {exit_code::ok, EndReason::job_done, "job done"};
    case JobEventKind::restart:
      // Asked to stop while the job was being stopped for its restart: no restart.
      if (stop_requests_ > 0) return {verdict_->status, EndReason::job_failed, failure_text(failed), verdict_->task};
      return {verdict_->status, EndReason::restarting, failure_text(failed) + "; restarting every task in place (" +
                                                           restart_text(verdict_->restart, settings_.max_restarts) + ", --max-restarts)",
              verdict_->task};
    case JobEventKind::preempt:
    case JobEventKind::task_failed:
    case JobEventKind::coordinator_lost: break;
  }
  return {verdict_->status, EndReason::job_failed, failure_text(failed), verdict_->task};
}

SupervisionEnd JobMachine::pod_end() const {
  const int status = task_status(0);
  const int any_failure = first_nonzero_.value_or(exit_code::ok);
  std::optional<SupervisionEnd> by_verdict;
  if (verdict_) {
    const JobEvent& event = *verdict_;
    const std::string text = verdict_text(event, settings_.max_restarts);
    // A verdict that came while the command ran decides; one that came after this task's own
    // failure or end says only whether the job restarts, or that it is done.
    const int own = verdict_after_failure_ ? status : any_failure;
    switch (event.kind) {
      case JobEventKind::restart: by_verdict = SupervisionEnd{own, EndReason::restarting, text, event.task}; break;
      case JobEventKind::preempt:
        // A command that saved its work and exited 0 is still not done: the job must be run again.
        by_verdict = SupervisionEnd{own != exit_code::ok ? own : exit_code::signal_base + event.status, EndReason::stopped_together, text,
                                    event.task};
        break;
      case JobEventKind::job_done:
        // The job ended with its coordinator's success; a failure here, as it ended (a trainer
        // whose peer went away), is part of that end, not a new failure.
        by_verdict = SupervisionEnd{exit_code::ok, EndReason::job_done,
                                    status == exit_code::ok ? text
                                                            : text + "; this task's command exited with status " + std::to_string(status) +
                                                                  " as the job ended, part of its end"};
        break;
      case JobEventKind::task_failed:
      case JobEventKind::coordinator_lost:
        if (!verdict_after_failure_ || status == exit_code::ok) {
          by_verdict = SupervisionEnd{exit_code::job_stopped, EndReason::job_failed, text, event.task};
        }
        break;
    }
  }
  if (by_verdict) {
    if (by_verdict->reason != EndReason::restarting || stop_requests_ == 0) return *by_verdict;
    // A task asked to stop does not rejoin: its pod is going away.
    return {by_verdict->exit_code != exit_code::ok ? by_verdict->exit_code : exit_code::signal_base + stop_signal_,
            EndReason::stopped_by_signal, "asked to stop while the job restarts: " + by_verdict->message, by_verdict->failed_task};
  }
  if (status != exit_code::ok && stop_requests_ > 0) {
    return {status, EndReason::stopped_by_signal, "asked to stop: the command exited with status " + std::to_string(status)};
  }
  if (stop_requests_ > 0 && settings_.stop_together) {
    return {exit_code::signal_base + stop_signal_, EndReason::stopped_by_signal,
            "asked to stop: the command exited with status 0, before the job was done (--stop-together: a status that asks for "
            "the job to run again)"};
  }
  if (status != exit_code::ok) {
    return {status, EndReason::command_failed, "the command failed" + (tasks_[0].detail.empty() ? std::string() : ": " + tasks_[0].detail)};
  }
  return {status, EndReason::command_succeeded, "the command succeeded"};
}

}  // namespace tfboot
