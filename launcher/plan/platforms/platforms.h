// Schedulers that already describe the job: Slurm, SageMaker, Volcano and JobSet give this task's
// identity and every task's address when neither --cluster nor an operator's TF_CONFIG does
// (docs/identity.md, "Platforms"). Pure: files come read in HostFacts.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "plan/cluster.h"
#include "plan/host_facts.h"
#include "plan/identity.h"
#include "plan/inputs.h"

namespace tfboot {

// More hosts than one task type may have in --cluster: a typo (or a runaway list), not a job.
inline constexpr std::size_t max_platform_hosts = max_tasks_per_type;

// What a platform says about the job.
struct PlatformJob {
  std::string platform;             // "Slurm", "SageMaker", "Volcano", "JobSet"
  Identity identity;                // its source names the platform: "Slurm (SLURM_PROCID)"
  std::vector<PeerAddress> peers;   // every task, in TF_CONFIG order
  std::optional<DnsSuffix> suffix;  // the peers' Service, when the names carry one (JobSet)
  std::optional<Framework> framework;       // the runtime's framework (Kubeflow's torch and JAX runtimes)
  std::optional<Setting> nproc_per_node;    // the runtime's processes per node (PET_NPROC_PER_NODE)
  std::vector<std::string> warnings;        // for the log (Plan::warnings)
};

struct PlatformInputs {
  const PlanInputs& parsed;  // --port, the identity flags and --framework, parsed
  const Environment& env;
  const HostFacts& facts;
  const Hostname& hostname;
};

// The first platform whose signs are present, in docs/identity.md's order: Kubeflow, JobSet, Volcano, Slurm,
// SageMaker; nullopt when there is none. Partial or malformed data is a usage error naming the
// variable or file.
Result<std::optional<PlatformJob>> describe_job_by_platform(const PlatformInputs& in);

// One platform each; nullopt when its signs are absent.
Result<std::optional<PlatformJob>> job_from_kubeflow(const PlatformInputs& in);
Result<std::optional<PlatformJob>> job_from_jobset(const PlatformInputs& in);
Result<std::optional<PlatformJob>> job_from_volcano(const PlatformInputs& in);
Result<std::optional<PlatformJob>> job_from_slurm(const PlatformInputs& in);
Result<std::optional<PlatformJob>> job_from_sagemaker(const PlatformInputs& in);

// The parts the platforms share.
namespace platform {

// A task's host name as the platform gives it, and its port.
struct Task {
  std::string host;
  int port = 0;
};
using TasksByType = std::array<std::vector<Task>, 4>;  // by TaskType, each in index order

// The environment variable's value with its name as the source; nullopt when unset or empty.
std::optional<Setting> env_setting(const Environment& env, const std::string& name);

// A host name that DNS cannot look up is an error naming where it came from.
Result<void> check_host_name(const std::string& host, const std::string& source);

// A usage error naming `path` when the platform's file is there but could not be read (host_facts.h).
Result<void> check_readable(const PlatformFiles& files, const std::string& path);

// The first label of a host name: "bert-worker-1-0" of "bert-worker-1-0.bert.ml.svc".
std::string first_label(std::string_view name);

// Every task as a peer, in TF_CONFIG order; two tasks at one address are an error naming `platform`.
Result<std::vector<PeerAddress>> peers_from_tasks(const TasksByType& tasks, const std::string& platform,
                                                  bool fully_qualified = false);

// A list of tasks whose first may be the chief (--chief-at-ordinal-0), the others workers: Slurm's
// tasks and SageMaker's hosts. Task k listens on its type's port plus port_offsets[k].
Result<std::vector<PeerAddress>> peers_from_ordinals(const std::vector<std::string>& hosts, const std::vector<int>& port_offsets,
                                                     const PortSpec& ports, bool chief_at_ordinal_0,
                                                     const std::string& platform);

}  // namespace platform

// "chief=1,worker=4": the task counts of a list of peers, as --cluster would give them.
std::string cluster_counts_text(const std::vector<PeerAddress>& peers);

}  // namespace tfboot
