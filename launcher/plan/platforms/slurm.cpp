// Slurm: the task's rank, the step's nodes and how many tasks each node runs, all from srun's
// environment (docs/identity.md, "Platforms").
#include <algorithm>
#include <array>
#include <numeric>
#include <set>
#include <string_view>

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

// How srun spread the step's tasks over its nodes (srun --distribution, docs/identity.md, "Platforms"). srun
// sets SLURM_DISTRIBUTION only when one was asked for; its default places tasks as block does.
enum class Distribution { block, cyclic };

Result<Distribution> slurm_distribution(const Environment& env) {
  auto setting = env_setting(env, "SLURM_DISTRIBUTION");
  if (!setting) return Distribution::block;
  // "cyclic", "block:cyclic", "cyclic:block,Pack": the part before ':' or ',' places tasks on
  // nodes; the rest places them on a node's sockets and cores, which moves no task to another node.
  const std::string_view across_nodes = std::string_view(setting->value).substr(0, setting->value.find_first_of(":,"));
  if (across_nodes == "block") return Distribution::block;
  if (across_nodes == "cyclic") return Distribution::cyclic;
  return usage_error("Slurm: " + quoted(*setting) + " places tasks in a way tfboot cannot map to hosts (it maps block and " +
                     "cyclic); start the step with srun --distribution=block or --distribution=cyclic");
}

// Where each task runs, in rank order: its node and its place on that node.
struct TaskPlace {
  std::size_t node;
  int local;
};

// block: each node's tasks before the next node's. cyclic: one task per node in turn, round after
// round, a node taking part in as many rounds as it has tasks (Slurm's _task_layout_cyclic).
std::vector<TaskPlace> place_tasks(Distribution distribution, const std::vector<int>& tasks_per_node) {
  std::vector<TaskPlace> places;
  if (distribution == Distribution::block) {
    for (std::size_t node = 0; node < tasks_per_node.size(); ++node) {
      for (int local = 0; local < tasks_per_node[node]; ++local) places.push_back({node, local});
    }
    return places;
  }
  const int rounds = tasks_per_node.empty() ? 0 : *std::max_element(tasks_per_node.begin(), tasks_per_node.end());
  for (int round = 0; round < rounds; ++round) {
    for (std::size_t node = 0; node < tasks_per_node.size(); ++node) {
      if (round < tasks_per_node[node]) places.push_back({node, round});
    }
  }
  return places;
}

// This task's place as the distribution puts it, checked against what Slurm says where it says it.
Result<void> check_place(const Environment& env, int rank, Distribution distribution, const TaskPlace& place,
                         const std::vector<std::string>& hosts, const Setting& tasks_setting) {
  auto local_id = env_setting(env, "SLURM_LOCALID");
  auto node_name = env_setting(env, "SLURMD_NODENAME");
  bool local_differs = local_id && local_id->value != std::to_string(place.local);
  bool node_differs = node_name && node_name->value != hosts[place.node];
  if (!local_differs && !node_differs) return {};
  std::string said = local_differs ? quoted(*local_id) : "";
  if (node_differs) said += (said.empty() ? "" : " and ") + quoted(*node_name);
  const std::string how = distribution == Distribution::block ? "when tasks fill the nodes in order (" + quoted(tasks_setting) + ")"
                                                              : "when tasks go round the nodes in turn (SLURM_DISTRIBUTION cyclic, " +
                                                                    quoted(tasks_setting) + ")";
  return usage_error("Slurm: SLURM_PROCID " + std::to_string(rank) + " is task " + std::to_string(place.local) + " on " +
                     hosts[place.node] + " " + how + ", but " + said +
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
  // Before the tasks are placed one by one: counts per node within their own limit can still
  // add up to billions.
  if (static_cast<std::size_t>(*task_count) > max_slurm_hosts) {
    return usage_error(quoted(*task_count_setting) + " is more than " + std::to_string(max_slurm_hosts) + " tasks");
  }
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
  auto distribution = slurm_distribution(in.env);
  if (!distribution) return std::unexpected(distribution.error());
  const std::vector<TaskPlace> places = place_tasks(*distribution, *tasks_per_node);
  if (auto placed = check_place(in.env, *rank, *distribution, places[*rank], *hosts, *tasks_setting); !placed) {
    return std::unexpected(placed.error());
  }

  // Task by task in rank order: the k-th task on a node listens on its type's port + k.
  std::vector<std::string> task_hosts;
  std::vector<int> port_offsets;
  for (const TaskPlace& place : places) {
    task_hosts.push_back((*hosts)[place.node]);
    port_offsets.push_back(place.local);
  }
  const PortSpec& ports = in.parsed.ports;
  auto peers = platform::peers_from_ordinals(task_hosts, port_offsets, ports, in.parsed.identity_flags.chief_at_ordinal_0, "Slurm");
  if (!peers) return std::unexpected(peers.error());
  Identity identity = identity_from_ordinal(TaskType::worker, *rank, in.parsed.identity_flags.chief_at_ordinal_0, "Slurm (SLURM_PROCID)");
  return std::optional<PlatformJob>{PlatformJob{"Slurm", identity, std::move(*peers), std::nullopt}};
}

}  // namespace tfboot
