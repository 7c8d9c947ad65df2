// The job's control channel after the start: the JobLink each side keeps while the command runs
// (the coordinator's over every supervised task, a task's over the coordinator). Made by the
// join files once the start barrier is passed; run.cpp and the supervisor use them via control/join.h.
#pragma once

#include <poll.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "control/job_settings.h"
#include "control/socket.h"

namespace tfboot {

struct StartInfo {
  std::vector<std::string> environment_differences;  // empty when all equal or --env-check off
  int tasks = 0;                                       // the job's size
  bool coordinator_supervises = false;                 // false: the link after the start is inert
  bool names_verified = false;                         // the coordinator found every name pointing at its task
  // Every task's addresses in cluster order (their names' DNS answers when names_verified): on
  // the coordinator, and on a task that asked for the table (--address ip); else empty.
  std::vector<std::vector<std::string>> addresses;
  // The job's rules, as the coordinator's start said them.
  int restarts = 0;
  int max_restarts = 0;
  bool stop_together = false;
  // --preflight passed: every task's clock offset from the coordinator's, in ms, in cluster order.
  std::optional<std::vector<std::int64_t>> clock_offsets_ms;
  // --preflight network passed: the job's figures.
  std::optional<NetworkSummary> network;
};

class JobLink {
 public:
  virtual ~JobLink() = default;
  const StartInfo& start_info() const { return start_info_; }
  // Appends the descriptors to watch (with their events) to `fds`.
  virtual void add_poll_fds(std::vector<pollfd>& fds) const = 0;
  // When process() must run even if no descriptor is ready (heartbeats, silence timeouts).
  virtual Instant next_wakeup() const = 0;
  // Handles whatever is ready in `fds` (ours are found by descriptor) and due at `now`. At most
  // one decision (job_done, task_failed or coordinator_lost) is ever returned.
  virtual std::vector<JobEvent> process(const std::vector<pollfd>& fds, Instant now) = 0;
  // Our own command ended with `status` (exit code, 128+N for signal N). A task tells the
  // coordinator; the coordinator tells every task "done" (0) or "stop" (non-zero), unless the
  // job was decided before.
  // `detail`: what failed, when known ("rank 3 on pod-1: RuntimeError: ..."), else "".
  // `rejoins`: false when our tfboot ends whatever the job decides (asked to stop): the
  // coordinator's own failure then stops the job rather than restart it without its barrier.
  virtual void report_exit(int status, const std::string& detail = "", bool rejoins = true) = 0;
  // After report_exit: the job is not decided yet: a task waits for the coordinator's verdict, the
  // coordinator of a PyTorch or JAX job for the other tasks, a failed task for a restart or the
  // stop; process() says when it is.
  virtual bool awaits_other_tasks() const { return false; }
  // A stop signal came to our tfboot: with stop_together, every task's command gets it too.
  virtual void report_stop_signal(int signal_number) = 0;
  // The job restarts in place after a failure (restarts < max_restarts).
  bool may_restart() const { return start_info_.restarts < start_info_.max_restarts; }
  // Delivers what is queued and closes, waiting at most `at_most`.
  virtual void finish(std::chrono::milliseconds at_most) = 0;

 protected:
  explicit JobLink(StartInfo info) : start_info_(std::move(info)) {}
  StartInfo start_info_;
};

// A supervised task's connection at the coordinator after the start.
struct LinkedTask {
  JobMember task;
  MessageConnection channel;
};
// The key the event set knows the listener by; tasks have their own keys, never this one.
inline constexpr std::uint64_t listener_key = 0;

// Both links run on a thread of their own from here until their first use, so that the work between
// the start and the supervisor's loop (the barrier's teardown, TF_CONFIG and startup.json for a large
// job, a slow log volume) keeps the heartbeats going; what the thread heard comes out of the first
// process(). exit_code::resources when no thread can be made.

// Heartbeats to every supervised task in `tasks` (by their keys in `events`), their exits and
// silences into a JobMonitor, its decisions out to every task; a new connection on `listener`
// (if kept, watched in `events` as listener_key) is refused at once.
// `carriers`: the relays' own connections (by their keys in `events`), which carry some of `tasks`.
Result<std::unique_ptr<JobLink>> make_coordinator_link(StartInfo info, const JobSettings& settings, Socket listener, EventSet events,
                                                       std::map<std::uint64_t, LinkedTask> tasks,
                                                       const std::vector<JobMonitor::Watched>& watched,
                                                       std::map<std::uint64_t, std::shared_ptr<Carrier>> carriers, Instant now);

// Heartbeats to the coordinator over `channel`, its done/stop in, our exit out. Without a
// channel (one side does not supervise) the link is inert.
Result<std::unique_ptr<JobLink>> make_task_link(StartInfo info, const JobSettings& settings, std::optional<MessageConnection> channel,
                                                Instant now);

}  // namespace tfboot
