// The job's control channel over TCP: the start barrier, then the link that the supervisor's poll
// loop keeps while the command runs. Effectful (sockets, poll); the decisions are made by the
// pure types of control_protocol.h.
//
// How run.cpp and the supervisor use it:
//   auto link = join_job(settings, read_fingerprint(env));  // blocks until the start, or an Error
//   link->start_info().environment_differences              // warn-level lines, for startup.json
//   exec mode:  link.reset(), then exec (the sockets are CLOEXEC anyway)
//   init mode:  each turn of the poll loop
//                 link->add_poll_fds(fds);  timeout until link->next_wakeup();  poll(fds)
//                 for (const JobEvent& event : link->process(fds, now)) ...
//                   job_done         -> stop the command (SIGTERM, SIGKILL after --stop-grace), exit 0
//                   task_failed      -> stop the command, exit exit_code::job_stopped (event.message)
//                   coordinator_lost -> the same
//               when the command ends: link->report_exit(status); link->finish(bound);
#pragma once

#include <poll.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "control/protocol/protocol.h"
#include "base/error.h"
#include "fingerprint/fingerprint.h"
#include "cli/options.h"

namespace tfboot {

struct JobSettings {
  std::string job_id;                // job_id(tf_config) from control_auth.h
  std::vector<JobMember> tasks;      // every task of the cluster, evaluator included, in cluster order
  JobMember self;
  JobMember coordinator;             // chief:0 if the cluster has a chief, else worker:0
  int port = 2220;                   // --control-port (never 0 here)
  std::chrono::milliseconds start_timeout{std::chrono::minutes(10)};
  EnvCheck env_check = EnvCheck::warn;
  std::optional<std::string> secret;  // read_control_secret()
  bool supervise = false;             // init mode: the link is kept after the start
  std::string hostname;               // this task's host name, for messages
  std::string own_name;               // this task's DNS name as in TF_CONFIG
  std::vector<std::string> own_addresses;
  // Called before each connection attempt (not on the coordinator): the coordinator's current
  // numeric addresses, or an error text ("NXDOMAIN", ...) while it does not resolve.
  std::function<Result<std::vector<std::string>>()> coordinator_addresses;
  // Called on the coordinator, on a thread of its own, once every task is present: the members
  // with the addresses their names resolve to, or the error that aborts the start (exit 3). Not
  // set: the start carries what the tasks reported, unverified. It must return by `deadline`.
  std::function<Result<std::vector<MemberInfo>>(const std::vector<MemberInfo>& members, Instant deadline)> verify_members;
  // The check starts no sooner than this after the last task said hello: a pod's DNS record may
  // lag its start a little, and a name asked before it is published gets its NXDOMAIN cached.
  std::chrono::milliseconds record_settle{1000};
  std::chrono::milliseconds heartbeat_every{2000};
  std::chrono::milliseconds peer_silent_after{10000};
  std::chrono::milliseconds hello_timeout{10000};   // a connection must say hello within this
  std::chrono::milliseconds progress_every{10000};  // progress lines in the log
};

// Checks before any socket: the lists, the port, the tasks named (usage errors).
Result<void> check_job_settings(const JobSettings& settings);
// Whether `task` is one of settings.tasks: a coordinator's start or stop naming another is refused.
bool in_cluster(const JobSettings& settings, const JobMember& task);

struct StartInfo {
  std::vector<std::string> environment_differences;  // empty when all equal or --env-check off
  std::vector<MemberInfo> members;                     // every task: host, DNS name, addresses
  bool coordinator_supervises = false;                 // false: the link after the start is inert
  bool names_verified = false;                         // members' addresses are their names' DNS answers
};

class JobLink {
 public:
  virtual ~JobLink() = default;
  const StartInfo& start_info() const { return start_info_; }
  // Appends the descriptors to watch (with their events) to `fds`.
  virtual void add_poll_fds(std::vector<pollfd>& fds) const = 0;
  // When process() must run even if no descriptor is ready (heartbeats, silence timeouts).
  virtual std::chrono::steady_clock::time_point next_wakeup() const = 0;
  // Handles whatever is ready in `fds` (ours are found by descriptor) and due at `now`. At most
  // one decision (job_done, task_failed or coordinator_lost) is ever returned.
  virtual std::vector<JobEvent> process(const std::vector<pollfd>& fds, std::chrono::steady_clock::time_point now) = 0;
  // Our own command ended with `status` (exit code, 128+N for signal N). A task tells the
  // coordinator; the coordinator tells every task "done" (0) or "stop" (non-zero), unless the
  // job was decided before.
  virtual void report_exit(int status) = 0;
  // Delivers what is queued and closes, waiting at most `at_most`.
  virtual void finish(std::chrono::milliseconds at_most) = 0;

 protected:
  explicit JobLink(StartInfo info) : start_info_(std::move(info)) {}
  StartInfo start_info_;
};

// The start barrier. Returns once the coordinator says start, or an Error:
//   exit_code::start_barrier_incomplete at the deadline (the coordinator names each missing
//     task, its host if known and its last error; a task says what it last saw),
//   exit_code::environment_mismatch with --env-check fail (on every task),
//   exit_code::usage for bad settings, exit_code::resources when the port cannot be opened.
// Progress is logged every progress_every.
Result<std::unique_ptr<JobLink>> join_job(const JobSettings& settings, const Fingerprint& own);

}  // namespace tfboot
