// The job step of the flow: joining the job's control channel after the DNS wait (the start
// barrier and the environment check), and the link the supervisor keeps afterwards
// (docs/supervision.md: Job supervision).
#pragma once

#include <memory>
#include <string>

#include "base/error.h"
#include "cli/options.h"
#include "control/join.h"
#include "flow/peer_dns.h"
#include "plan/host_facts.h"
#include "plan/plan.h"
#include "supervise/loop.h"

namespace tfboot {

struct JobMembership {
  bool joined = false;      // the task went through the start barrier
  std::unique_ptr<JobLink> link;  // null when the control channel is off for this task, or after exec
  std::string summary_json;       // startup.json's "job" object, or "" when off
  std::vector<std::string> environment_differences;
  // The coordinator resolved every name and found each pointing at its task (not with --wait 0
  // there, nor without the control channel).
  bool names_verified = false;
  // Then, for the coordinator and a task that asked (--address ip): every task's addresses, in
  // cluster order; empty otherwise.
  std::vector<std::vector<std::string>> verified_addresses;
  // The job's restarts so far and the most it makes in place, as the coordinator's start said.
  int restarts = 0;
  int max_restarts = 0;
  std::string preflight_json;  // startup.json's "preflight" object, or "" when --preflight is off
};

// What can be checked before any lookup: the secret file (exit 2 when unusable).
Result<std::optional<std::string>> read_secret_if_given(const Options& options);

// Off for --print, --control-port 0, a job of one task, or one without chief or worker.
bool job_supervision_applies(const Options& options, const Plan& plan);

// The coordinator listens on --control-port on its host: a task of the job that would listen on
// the same port there (TF_CONFIG's, or Slurm's consecutive ports on one node) is a usage error,
// said before any lookup rather than by the trainer's failing bind on every restart.
Result<void> check_control_port_is_free(const Options& options, const Plan& plan);

// The names a task resolves itself before the barrier when the control channel applies: the
// coordinator's only, none on the coordinator (docs/supervision.md: Job supervision). The coordinator
// resolves every name, its own too, once every task is present; a name asked earlier, before
// its record exists, would have its NXDOMAIN cached by the cluster DNS.
std::vector<PeerAddress> peers_to_resolve_before_the_barrier(const Plan& plan);
// Where the coordinator is in `peers`, unless it is this task itself.
std::optional<std::size_t> coordinator_position(const Plan& plan, const std::vector<PeerAddress>& peers);

// Blocks until the coordinator starts the job; exit 5 (barrier incomplete), 6 (environment
// check failed), 3 (a name that does not resolve or points elsewhere, found by the coordinator),
// 2 or 7 on errors. `supervise`: init mode, the link is kept after the start.
// `started`: when this tfboot started (the coordinator's name check waits for young pods' records).
// `restarts`: the job's restarts so far, as this task knows them (the coordinator's count is the
// job's: the start carries it, JobMembership::restarts). `processes_per_node`: PyTorch and JAX,
// this node's processes, which the coordinator finds equal on every node or refuses (exit 2).
Result<JobMembership> pass_start_barrier(const Options& options, const Environment& env, const Plan& plan, const HostFacts& facts,
                                   const std::optional<std::string>& secret, bool supervise, Instant started, int restarts = 0,
                                   int processes_per_node = 0);

// One answer per peer in cluster order, for TF_CONFIG (--address ip) and startup.json. `own` holds
// the task's own lookups, by name; those are kept. The others are resolved when the
// coordinator verified them (`verified`), with the addresses of its `table` where the start
// carried one.
std::vector<NameStatus> answers_from_table(const Plan& plan, const std::vector<NameStatus>& own, bool verified,
                                           const std::vector<std::vector<std::string>>& table);

// The link as the job the supervisor reports to and hears the verdict from.
std::unique_ptr<Job> make_linked_job(JobLink& link);

}  // namespace tfboot
