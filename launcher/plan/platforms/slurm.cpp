// Slurm: the task's rank, the step's nodes and how many tasks each node runs, all from srun's
// environment (README: Identity, "Platforms").
#include <array>
#include <numeric>
#include <set>

#include "plan/platforms/platforms.h"
#include "plan/platforms/slurm_hostlist.h"

namespace tfboot {
namespace {

using platform::env_setting;

// Where the layout comes from: all three from the job step (srun sets them for its tasks), or,
// with none of the step's set, all three from the job; never a mix of the two.
struct SlurmLayout {
  Setting nodelist;
  Setting task_count;
  Setting tasks_per_node;
};

Result<SlurmLayout> slurm_layout(const Environment& env, int rank) {
  const bool in_step = env_setting(env, "SLURM_STEP_NODELIST") || env_setting(env, "SLURM_STEP_NUM_TASKS") ||
                       env_setting(env, "SLURM_STEP_TASKS_PER_NODE");
  const std::array<std::string, 3> names = in_step ? std::array<std::string, 3>{"SLURM_STEP_NODELIST", "SLURM_STEP_NUM_TASKS", "SLURM_STEP_TASKS_PER_NODE"}
                                                   : std::array<std::string, 3>{"SLURM_JOB_NODELIST", "SLURM_NTASKS", "SLURM_TASKS_PER_NODE"};
  std::array<Setting, 3> found;
  for (std::size_t i = 0; i < names.size(); ++i) {
    auto setting = env_setting(env, names[i]);
    if (!setting) return usage_error("Slurm (SLURM_PROCID is set): " + names[i] + " is not set");
    found[i] = *setting;
  }
  // A batch script sees the job's variables and SLURM_PROCID 0 but is no task of a step: started
  // there without srun, tfboot would wait for peers that never come.
  if (!in_step && rank == 0 && found[1].value != "1") {
    return usage_error("Slurm: SLURM_PROCID is set without SLURM_STEP_* while SLURM_NTASKS is '" + found[1].value +
                       "': this is the batch script, not a task of a job step; start tfboot with srun");
  }
  return SlurmLayout{found[0], found[1], found[2]};
}

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
  auto layout = slurm_layout(in.env, *rank);
  if (!layout) return std::unexpected(layout.error());
  const Setting* nodelist = &layout->nodelist;
  const Setting* task_count_setting = &layout->task_count;
  const Setting* tasks_setting = &layout->tasks_per_node;

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
  const PortSpec& ports = in.parsed.ports;
  auto peers = platform::peers_from_ordinals(task_hosts, port_offsets, ports, in.options.chief_at_ordinal_0, "Slurm");
  if (!peers) return std::unexpected(peers.error());
  Identity identity = identity_from_ordinal(TaskType::worker, *rank, in.options.chief_at_ordinal_0, "Slurm (SLURM_PROCID)");
  return std::optional<PlatformJob>{PlatformJob{"Slurm", identity, std::move(*peers), std::nullopt}};
}

}  // namespace tfboot
