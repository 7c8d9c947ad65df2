// Slurm: the task's rank, the step's nodes and how many tasks each node runs, all from srun's
// environment (README: Identity, "Platforms").
#include <numeric>
#include <set>

#include "platforms.h"
#include "slurm_hostlist.h"

namespace tfboot {
namespace {

using platform::env_setting;

// The step's variable, else the job's (a task started outside a step of its own sees only those).
Result<Setting> step_or_job(const Environment& env, const std::string& step_name, const std::string& job_name) {
  if (auto setting = env_setting(env, step_name)) return *setting;
  if (auto setting = env_setting(env, job_name)) return *setting;
  return usage_error("Slurm (SLURM_PROCID is set): neither " + step_name + " nor " + job_name + " is set");
}

std::string quoted(const Setting& setting) { return setting.source + " '" + setting.value + "'"; }

// srun's default block distribution fills each node before the next: this task's node and its
// place on it, checked against what Slurm says where it says it.
Result<void> check_block_distribution(const Environment& env, int rank, const std::vector<std::string>& hosts,
                                      const std::vector<int>& tasks_per_node, const Setting& tasks_setting) {
  std::size_t node = 0;
  int first_on_node = 0;
  while (rank >= first_on_node + tasks_per_node[node]) first_on_node += tasks_per_node[node++];
  const int local = rank - first_on_node;
  auto local_id = env_setting(env, "SLURM_LOCALID");
  auto node_name = env_setting(env, "SLURMD_NODENAME");
  bool local_differs = local_id && local_id->value != std::to_string(local);
  bool node_differs = node_name && node_name->value != hosts[node];
  if (!local_differs && !node_differs) return {};
  std::string said = local_differs ? quoted(*local_id) : "";
  if (node_differs) said += (said.empty() ? "" : " and ") + quoted(*node_name);
  return usage_error("Slurm: SLURM_PROCID " + std::to_string(rank) + " is task " + std::to_string(local) + " on " + hosts[node] +
                     " when tasks fill the nodes in order (" + quoted(tasks_setting) + "), but " + said +
                     "; start the step with block distribution (srun --distribution=block)");
}

}  // namespace

Result<std::optional<PlatformJob>> job_from_slurm(const PlatformInputs& in) {
  auto rank_setting = env_setting(in.env, "SLURM_PROCID");
  if (!rank_setting) return std::optional<PlatformJob>{};
  auto rank = parse_index(rank_setting->value);
  if (!rank) return usage_error(quoted(*rank_setting) + " is not a non-negative integer");
  auto nodelist = step_or_job(in.env, "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST");
  if (!nodelist) return std::unexpected(nodelist.error());
  auto task_count_setting = step_or_job(in.env, "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS");
  if (!task_count_setting) return std::unexpected(task_count_setting.error());
  auto tasks_setting = step_or_job(in.env, "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE");
  if (!tasks_setting) return std::unexpected(tasks_setting.error());

  auto hosts = expand_hostlist(*nodelist);
  if (!hosts) return std::unexpected(hosts.error());
  auto tasks_per_node = expand_tasks_per_node(*tasks_setting);
  if (!tasks_per_node) return std::unexpected(tasks_per_node.error());
  auto task_count = parse_index(task_count_setting->value);
  if (!task_count || *task_count == 0) return usage_error(quoted(*task_count_setting) + " is not a positive integer");
  if (tasks_per_node->size() != hosts->size()) {
    return usage_error(quoted(*tasks_setting) + " places tasks on " + std::to_string(tasks_per_node->size()) + " nodes, but " +
                       quoted(*nodelist) + " names " + std::to_string(hosts->size()));
  }
  if (long placed = std::accumulate(tasks_per_node->begin(), tasks_per_node->end(), 0L); placed != *task_count) {
    return usage_error(quoted(*tasks_setting) + " places " + std::to_string(placed) + " tasks, but " +
                       quoted(*task_count_setting) + " says " + std::to_string(*task_count));
  }
  if (*rank >= *task_count) return usage_error(quoted(*rank_setting) + " is outside " + quoted(*task_count_setting));
  std::set<std::string> seen;
  for (const auto& host : *hosts) {
    if (auto named = platform::check_host_name(host, quoted(*nodelist)); !named) return std::unexpected(named.error());
    if (!seen.insert(host).second) return usage_error(quoted(*nodelist) + " names host '" + host + "' twice");
  }
  if (auto placed = check_block_distribution(in.env, *rank, *hosts, *tasks_per_node, *tasks_setting); !placed) {
    return std::unexpected(placed.error());
  }

  // Task by task in rank order: the k-th task on a node listens on its type's port + k.
  std::vector<std::string> task_hosts;
  std::vector<int> port_offsets;
  for (std::size_t node = 0; node < hosts->size(); ++node) {
    for (int k = 0; k < (*tasks_per_node)[node]; ++k) {
      task_hosts.push_back((*hosts)[node]);
      port_offsets.push_back(k);
    }
  }
  auto ports = parse_port_spec(in.options.port);
  if (!ports) return std::unexpected(ports.error());
  auto peers = platform::peers_from_ordinals(task_hosts, port_offsets, *ports, in.options.chief_at_ordinal_0, "Slurm");
  if (!peers) return std::unexpected(peers.error());
  Identity identity = identity_from_ordinal(TaskType::worker, *rank, in.options.chief_at_ordinal_0, "Slurm (SLURM_PROCID)");
  return std::optional<PlatformJob>{PlatformJob{"Slurm", identity, std::move(*peers), std::nullopt}};
}

}  // namespace tfboot
