// Kubeflow: a TrainJob's torch and JAX runtimes, and a PyTorchJob, describe the job in variables
// (PET_* as torchrun reads them; JAX_*; an older PyTorchJob's MASTER_ADDR, MASTER_PORT,
// WORLD_SIZE and RANK with --framework pytorch). The nodes' names follow node 0's, the master
// (docs/frameworks.md: PyTorch and JAX, "Kubeflow").
#include <array>
#include <charconv>

#include "base/text.h"
#include "plan/platforms/platforms.h"
#include "plan/tf_config.h"

namespace tfboot {
namespace {

std::optional<int> parse_number(const std::string& text, int min, int max) {
  int value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{} || end != text.data() + text.size() || value < min || value > max) return std::nullopt;
  return value;
}

// What the runtime's variables say, before the names are derived.
struct NodeVariables {
  std::string platform;          // "Kubeflow TrainJob (torch)"
  Framework framework;
  Setting master;                // host, no port
  int port = 0;
  int nodes = 0;
  int node_rank = 0;
  std::string rank_source;       // "PET_NODE_RANK"
  std::optional<Setting> nproc;  // PET_NPROC_PER_NODE
};

Result<int> number_from(const Setting& setting, int min, int max) {
  auto value = parse_number(setting.value, min, max);
  if (!value) return usage_error(quoted(setting) + " must be a number " + std::to_string(min) + ".." + std::to_string(max));
  return *value;
}

// All of the names or none: a partial set is a misconfigured manifest, said by name.
Result<std::optional<std::vector<Setting>>> all_or_none(const Environment& env, std::initializer_list<const char*> names,
                                                        const std::string& platform) {
  std::vector<Setting> found;
  std::string missing;
  for (const char* name : names) {
    if (auto setting = platform::env_setting(env, name)) found.push_back(*setting);
    else missing += (missing.empty() ? "" : ", ") + std::string(name);
  }
  if (found.empty()) return std::optional<std::vector<Setting>>{};
  if (!missing.empty()) return usage_error(platform + ": " + found.front().source + " is set but " + missing + " is not");
  return std::optional<std::vector<Setting>>{found};
}

// A node count, a node rank, the master's host and its port, named by `names` in that order.
Result<std::optional<NodeVariables>> nodes_rank_master_port(const Environment& env, const std::array<const char*, 4>& names,
                                                            std::optional<Setting> nproc) {
  const std::string platform = "Kubeflow";
  auto found = all_or_none(env, {names[0], names[1], names[2], names[3]}, platform);
  if (!found) return std::unexpected(found.error());
  if (!*found) return std::optional<NodeVariables>{};
  const auto& values = **found;
  NodeVariables job{platform, Framework::pytorch, values[2], 0, 0, 0, names[1], std::move(nproc)};
  auto nodes = number_from(values[0], 1, static_cast<int>(max_platform_hosts));
  if (!nodes) return std::unexpected(nodes.error());
  auto rank = number_from(values[1], 0, *nodes - 1);
  if (!rank) {
    return usage_error(quoted(values[1]) + " must be a node rank 0.." + std::to_string(*nodes - 1) + " (" + names[0] + " is " +
                       values[0].value + ")");
  }
  auto port = number_from(values[3], 1, 65535);
  if (!port) return std::unexpected(port.error());
  job.nodes = *nodes;
  job.node_rank = *rank;
  job.port = *port;
  return std::optional<NodeVariables>{job};
}

// What torchrun reads: a TrainJob's torch runtime and a PyTorchJob set these.
Result<std::optional<NodeVariables>> torch_variables(const Environment& env) {
  return nodes_rank_master_port(env, {"PET_NNODES", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT"},
                                platform::env_setting(env, "PET_NPROC_PER_NODE"));
}

// An older PyTorchJob sets only torch's own names, which any launcher may have left behind: read
// them only when --framework pytorch says so. WORLD_SIZE counts nodes here (one process each).
Result<std::optional<NodeVariables>> pytorchjob_variables(const Environment& env) {
  return nodes_rank_master_port(env, {"WORLD_SIZE", "RANK", "MASTER_ADDR", "MASTER_PORT"}, std::nullopt);
}

Result<std::optional<NodeVariables>> jax_variables(const Environment& env) {
  const std::string platform = "Kubeflow";
  auto found = all_or_none(env, {"JAX_NUM_PROCESSES", "JAX_PROCESS_ID", "JAX_COORDINATOR_ADDRESS"}, platform);
  if (!found) return std::unexpected(found.error());
  if (!*found) return std::optional<NodeVariables>{};
  const auto& values = **found;
  auto [host, port] = split_address(values[2].value);
  if (host.empty() || port <= 0 || port > 65535) return usage_error(quoted(values[2]) + " must be host:port");
  NodeVariables job{platform, Framework::jax, Setting{host, values[2].source}, port, 0, 0, "JAX_PROCESS_ID", std::nullopt};
  auto nodes = number_from(values[0], 1, static_cast<int>(max_platform_hosts));
  if (!nodes) return std::unexpected(nodes.error());
  auto rank = number_from(values[1], 0, *nodes - 1);
  if (!rank) return usage_error(quoted(values[1]) + " must be a process id 0.." + std::to_string(*nodes - 1) + " (JAX_NUM_PROCESSES is " + values[0].value + ")");
  job.nodes = *nodes;
  job.node_rank = *rank;
  return std::optional<NodeVariables>{job};
}

// Node k's name from node 0's: a TrainJob's nodes are "<job>-node-0-<k>.<job>" (JobSet's pod
// names), a PyTorchJob's "<job>-master-0" and then "<job>-worker-<k-1>".
Result<PlatformJob> nodes_from_master(const NodeVariables& in, const PortSpec& ports, bool port_given) {
  const std::string& master = in.master.value;
  const std::size_t dot = master.find('.');
  const std::string label = master.substr(0, dot);
  const std::string domain = dot == std::string::npos ? "" : master.substr(dot);
  if (auto named = platform::check_host_name(master, in.master.source); !named) return std::unexpected(named.error());
  const int port = port_given ? ports.port(TaskType::worker) : in.port;
  platform::TasksByType tasks;
  Identity identity;
  if (label.ends_with("-master-0")) {
    const std::string prefix = label.substr(0, label.size() - 9);
    tasks[static_cast<std::size_t>(TaskType::chief)].push_back({master, port_given ? ports.port(TaskType::chief) : in.port});
    for (int k = 0; k + 1 < in.nodes; ++k) tasks[static_cast<std::size_t>(TaskType::worker)].push_back({prefix + "-worker-" + std::to_string(k) + domain, port});
    identity = in.node_rank == 0 ? Identity{TaskType::chief, 0, ""} : Identity{TaskType::worker, in.node_rank - 1, ""};
  } else if (label.ends_with("-0")) {
    const std::string prefix = label.substr(0, label.size() - 1);
    for (int k = 0; k < in.nodes; ++k) tasks[static_cast<std::size_t>(TaskType::worker)].push_back({prefix + std::to_string(k) + domain, port});
    identity = Identity{TaskType::worker, in.node_rank, ""};
  } else {
    return usage_error(quoted(in.master) + " is not named like node 0 of a TrainJob (<name>-node-0-0) or of a PyTorchJob "
                       "(<name>-master-0), so the other nodes' names are unknown; give --cluster (and --peer-template)");
  }
  identity.source = in.platform + " (" + in.rank_source + "=" + std::to_string(in.node_rank) + ")";
  auto peers = platform::peers_from_tasks(tasks, in.platform);
  if (!peers) return std::unexpected(peers.error());
  PlatformJob job{in.platform, identity, std::move(*peers), std::nullopt};
  job.framework = in.framework;
  job.nproc_per_node = in.nproc;
  return job;
}

}  // namespace

Result<std::optional<PlatformJob>> job_from_kubeflow(const PlatformInputs& in) {
  auto torch = torch_variables(in.env);
  if (!torch) return std::unexpected(torch.error());
  auto jax = *torch ? Result<std::optional<NodeVariables>>{std::optional<NodeVariables>{}} : jax_variables(in.env);
  if (!jax) return std::unexpected(jax.error());
  const bool pytorch_asked = in.parsed.framework == Framework::pytorch;
  auto plain = *torch || *jax || !pytorch_asked ? Result<std::optional<NodeVariables>>{std::optional<NodeVariables>{}}
                                                : pytorchjob_variables(in.env);
  if (!plain) return std::unexpected(plain.error());
  const std::optional<NodeVariables>& found = *torch ? *torch : *jax ? *jax : *plain;
  if (!found) return std::optional<PlatformJob>{};
  auto job = nodes_from_master(*found, in.parsed.ports, in.parsed.port_given);
  if (!job) return std::unexpected(job.error());
  return std::optional<PlatformJob>{std::move(*job)};
}

}  // namespace tfboot
