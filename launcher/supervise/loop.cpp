// The loop that drives the job machine (loop.h).
#include "supervise/loop.h"

#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <set>
#include <sstream>

#include "base/log.h"
#include "base/text.h"

namespace tfboot {
namespace {

using namespace std::chrono_literals;

// How often an ended process's group is looked at while something it left is still there.
constexpr auto group_poll = 20ms;

bool group_is_empty(pid_t group) { return ::kill(-group, 0) != 0 && errno == ESRCH; }

class Loop {
 public:
  Loop(ChildSet& children, std::vector<std::size_t> ids, Job* job, const SupervisorSettings& settings)
      : children_(children), ids_(std::move(ids)), job_(job), settings_(settings),
        machine_(settings.tasks, settings.watched, settings.machine) {}

  SupervisionEnd run() {
    while (!machine_.ended() || children_.has_pending_events()) {
      std::vector<pollfd> fds;
      if (job_) job_->add_poll_fds(fds);
      ChildSet::Event event = children_.wait(next_wakeup(), fds);
      const Instant now = SteadyClock::now();
      if (event.kind == ChildSet::Event::Kind::signal) machine_.on_signal(event.signal_number, now);
      if (event.kind == ChildSet::Event::Kind::exited) on_exit(event, now);
      perform(now);
      // The job is served on every turn, whatever woke us: its heartbeats and answers must flow
      // while leftovers are waited for, while stopping, and while waiting for the verdict.
      if (job_) hear(job_->process(fds, now), now);
      for (std::size_t process : machine_.groups_to_watch()) {
        if (group_is_empty(children_.pid(ids_[process]))) machine_.on_group_empty(process);
      }
      machine_.on_time(now);
      perform(now);
    }
    children_.drain_output(1s);
    return machine_.end();
  }

 private:
  Instant next_wakeup() const {
    Instant wake = machine_.next_deadline();
    if (job_) wake = std::min(wake, job_->next_wakeup());
    if (!machine_.groups_to_watch().empty()) wake = std::min(wake, SteadyClock::now() + group_poll);
    return wake;
  }

  void on_exit(const ChildSet::Event& event, Instant now) {
    auto it = std::ranges::find(ids_, event.child);
    if (it == ids_.end()) return;
    const auto process = static_cast<std::size_t>(it - ids_.begin());
    std::string detail;
    if (event.exit_code != exit_code::ok && settings_.failure_detail) {
      detail = settings_.failure_detail(process, event.exit_code, children_.last_words(event.child));
    }
    machine_.on_process_exit(process, event.exit_code, detail, now);
  }

  void hear(const std::vector<JobEvent>& events, Instant now) {
    for (const JobEvent& event : events) machine_.on_job_event(event, now);
  }

  void perform(Instant now) { perform_actions(machine_, control_, job_, now); }

  // The processes as the machine's actions reach them: each process's group in `children`.
  class ChildControl final : public ProcessControl {
   public:
    ChildControl(ChildSet& children, const std::vector<std::size_t>& ids, const SupervisorSettings& settings)
        : children_(children), ids_(ids), settings_(settings) {}
    void signal(const std::vector<std::size_t>& processes, int signal_number) override {
      for (std::size_t process : processes) children_.signal(ids_[process], signal_number);
    }
    bool signal_leftovers(std::size_t process, int signal_number) override {
      if (::kill(-children_.pid(ids_[process]), signal_number) != 0) return false;  // nothing left
      if (signal_number == SIGTERM) {
        const std::string& name = settings_.watched[process].name;
        log::info("{} left processes in its group: SIGTERM, SIGKILL after {}", name.empty() ? std::string("the command") : name,
                  seconds_text(settings_.machine.stop_grace));
      }
      return true;
    }
    void suspend_self() override { ::kill(::getpid(), SIGSTOP); }

   private:
    ChildSet& children_;
    const std::vector<std::size_t>& ids_;
    const SupervisorSettings& settings_;
  };

  ChildSet& children_;
  std::vector<std::size_t> ids_;  // each process's child in `children_`
  Job* job_;
  const SupervisorSettings& settings_;
  JobMachine machine_;
  ChildControl control_{children_, ids_, settings_};
};

// Our children by /proc: the processes whose parent is this tfboot.
std::vector<pid_t> own_children() {
  std::vector<pid_t> found;
  DIR* proc = ::opendir("/proc");
  if (!proc) return found;
  const pid_t self = ::getpid();
  while (const dirent* entry = ::readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(entry->d_name, &end, 10);
    if (pid <= 0 || *end != '\0') continue;
    std::ifstream stat("/proc/" + std::string(entry->d_name) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so read after the last ')'.
    const auto close = text.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(text.substr(close + 1));
    char state = 0;
    long parent = 0;
    if (rest >> state >> parent && parent == self && state != 'Z') found.push_back(static_cast<pid_t>(pid));
  }
  ::closedir(proc);
  return found;
}

void reap_what_ended() {
  while (::waitpid(-1, nullptr, WNOHANG) > 0) {
  }
}

}  // namespace

LocalJob::LocalJob(const std::vector<JobMember>& tasks, JobRules rules)
    : tasks_(tasks),
      monitor_(tasks.front(),
               [&] {
                 std::vector<JobMonitor::Watched> watched;
                 for (std::size_t i = 1; i < tasks.size(); ++i) watched.push_back({tasks[i], true});
                 return watched;
               }(),
               std::chrono::hours(24 * 365), SteadyClock::now(), rules) {}

std::vector<JobEvent> LocalJob::process(const std::vector<pollfd>&, Instant) { return std::exchange(events_, {}); }

void LocalJob::report_exit(std::size_t task, int status, const std::string& detail, bool rejoins) {
  JobDecision decision = task == 0 ? monitor_.on_own_exit(status, detail, rejoins)
                                   : monitor_.on_task_exit(tasks_[task], status, detail, rejoins);
  events_.insert(events_.end(), decision.events.begin(), decision.events.end());
  // What a coordinator would broadcast is the verdict here, for every task alike.
  if (decision.broadcast && decision.events.empty()) {
    if (std::holds_alternative<Done>(*decision.broadcast)) events_.push_back({JobEventKind::job_done, tasks_.front().text(), 0, ""});
  }
}

Result<SupervisionEnd> supervise_processes(ChildSet& children, const std::vector<CommandProcess>& processes, Job* job,
                                           const SupervisorSettings& settings) {
  std::vector<std::size_t> ids;
  for (const CommandProcess& process : processes) {
    // On failure the ChildSet's destructor stops and reaps the processes already started.
    auto started = children.start(process.spec);
    if (!started) return std::unexpected(started.error());
    ids.push_back(*started);
  }
  return Loop(children, std::move(ids), job, settings).run();
}

void end_orphans(std::chrono::milliseconds grace) {
  reap_what_ended();
  std::vector<pid_t> orphans = own_children();
  if (orphans.empty()) return;
  log::info("the last run left {} outside its process groups: SIGTERM, SIGKILL after {}", counted(orphans.size(), "process"),
            seconds_text(grace));
  std::set<pid_t> signalled;
  const Instant deadline = SteadyClock::now() + grace;
  while (!orphans.empty() && SteadyClock::now() < deadline) {
    for (pid_t pid : orphans) {
      if (signalled.insert(pid).second) ::kill(pid, SIGTERM);
    }
    ::usleep(20'000);
    reap_what_ended();
    orphans = own_children();
  }
  if (orphans.empty()) return;
  log::warn("{} of the last run still running after the grace period: SIGKILL", counted(orphans.size(), "process"));
  for (pid_t pid : orphans) ::kill(pid, SIGKILL);
  const Instant give_up = SteadyClock::now() + 1s;
  while (!own_children().empty() && SteadyClock::now() < give_up) {
    ::usleep(20'000);
    reap_what_ended();
  }
  reap_what_ended();
}

void perform_actions(JobMachine& machine, ProcessControl& processes, Job* job, Instant now) {
  using Kind = SupervisorAction::Kind;
  for (auto actions = machine.take_actions(); !actions.empty(); actions = machine.take_actions()) {
    for (const SupervisorAction& action : actions) {
      switch (action.kind) {
        case Kind::signal: processes.signal(action.processes, action.signal_number); break;
        case Kind::signal_leftovers:
          for (std::size_t process : action.processes) {
            if (!processes.signal_leftovers(process, action.signal_number)) machine.on_group_empty(process);
          }
          break;
        case Kind::report_exit:
          if (!job) break;
          job->report_exit(action.task, action.status, action.detail, action.rejoins);
          for (const JobEvent& event : job->process({}, now)) machine.on_job_event(event, now);
          if (!job->verdict_pending()) machine.on_no_verdict();
          break;
        case Kind::report_stop_signal:
          if (job) job->report_stop_signal(action.signal_number);
          break;
        case Kind::suspend_self: processes.suspend_self(); break;
      }
    }
  }
}

}  // namespace tfboot
