// The job's control channel as configured for one task: who the tasks are, who coordinates,
// the port, the deadlines and the callbacks that reach the DNS (made by flow/job.cpp).
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/choices.h"
#include "base/setting.h"
#include "control/protocol/protocol.h"

namespace tfboot {

// The coordinator's check of the job's names.
struct VerifiedMembers {
  std::vector<MemberInfo> table;  // every task, with the addresses its name resolves to
  // Tasks whose connection came from an address their name does not resolve to, each with why:
  // a stranger in the task's place (or a NAT; --control-source-check off). Dropped, not started.
  std::vector<std::pair<JobMember, std::string>> strangers;
};

struct JobSettings {
  std::string job_id;                // job_id(tf_config) from control/auth.h
  std::vector<JobMember> tasks;      // every task of the cluster, evaluator included, in cluster order
  JobMember self;
  JobMember coordinator;             // chief:0 if the cluster has a chief, else worker:0
  int port = 2220;                   // --control-port (never 0 here)
  // The start tree (control/protocol/tree.h), above 128 tasks: the port relays listen on
  // (--relay-port, the control port by default), and a task's current addresses, by which a task
  // finds its relay (asked before each connection, as the coordinator's are).
  int relay_port = 2220;
  std::function<Result<std::vector<std::string>>(const JobMember& task)> task_addresses;
  std::chrono::milliseconds start_timeout{std::chrono::minutes(10)};  // positive: check_options says so (plan/plan.h)
  EnvCheck env_check = EnvCheck::warn;
  std::optional<std::string> secret;  // read_control_secret()
  bool supervise = false;             // init mode: the link is kept after the start
  // PyTorch and JAX: the job is done when every task's command succeeded (as torchrun waits for
  // every rank), not when the coordinator's did (TensorFlow's chief).
  bool done_when_every_task_is = false;
  // PyTorch and JAX: the processes this node runs (--nproc-per-node resolved), which every node of
  // the job must share; 0 for TensorFlow.
  int processes_per_node = 0;
  // After the start, the coordinator's rules for the job (docs/supervision.md: Job supervision, restarts in place): the
  // restarts made so far, the most made in place, a stop signal to one task passed to all.
  int restarts = 0;
  int max_restarts = 0;
  bool stop_together = false;
  std::string hostname;               // this task's host name, for messages
  std::string own_name;               // this task's DNS name as in TF_CONFIG
  std::string coordinator_name;       // the coordinator's DNS name as in TF_CONFIG, for messages
  std::vector<std::string> own_addresses;
  Instant started{};          // when this tfboot started: the hello says how long ago
  bool wants_table = false;   // the start must carry every task's addresses (--address ip)
  // Called before each connection attempt (not on the coordinator): the coordinator's current
  // numeric addresses, or an error text ("NXDOMAIN", ...) while it does not resolve.
  std::function<Result<std::vector<std::string>>()> coordinator_addresses;
  // Called on the coordinator, on a thread of its own, once every task is present: the members
  // with the addresses their names resolve to and the strangers among them, or the error that
  // aborts the start (exit 3). Not set: the start carries what the tasks reported, unverified. It
  // must return by `deadline`.
  std::function<Result<VerifiedMembers>(const std::vector<MemberInfo>& members, Instant deadline)> verify_members;
  // The check starts no sooner than this after the last task said hello: a pod's DNS record may
  // lag its start a little, and a name asked before it is published gets its NXDOMAIN cached.
  std::chrono::milliseconds record_settle{1000};
  // The coordinator: every task's state at the barrier, when it begins, at each heartbeat and at
  // its end (docs/observing.md). Not set: nobody asks.
  std::function<void(const std::vector<StartBarrier::TaskState>& tasks, bool started)> on_barrier_state;
  std::chrono::milliseconds heartbeat_every{2000};
  std::chrono::milliseconds peer_silent_after{10000};
  std::chrono::milliseconds hello_timeout{10000};   // a connection must say hello within this
  std::chrono::milliseconds progress_every{10000};  // progress lines in the log
  // --preflight (docs/preflight.md): the level (the coordinator's is the job's), what this task
  // found on its node for its hello, and a shift of the wall clock the hello reports (tests only).
  PreflightLevel preflight = PreflightLevel::off;
  std::optional<NodeFigures> node_figures;
  // --preflight network: the port this task measures its links on, and the verdict's bounds.
  int network_port = 2221;  // 0: one the kernel chooses (tasks that share a host)
  NetworkBounds network_bounds;
  std::int64_t clock_offset_for_tests_ms = 0;
};

// Checks before any socket: the lists, the port, the tasks named (usage errors).
Result<void> check_job_settings(const JobSettings& settings);
// Whether `task` is one of settings.tasks: a coordinator's start or stop naming another is refused.
bool in_cluster(const JobSettings& settings, const JobMember& task);

}  // namespace tfboot
