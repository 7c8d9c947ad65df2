// The job as PyTorch and JAX see it (nodes.h).
#include "framework/nodes.h"

#include <algorithm>

#include "base/text.h"
#include "framework/nproc_per_node.h"

namespace tfboot {

std::string framework_name(Framework framework) {
  switch (framework) {
    case Framework::tensorflow: return "tensorflow";
    case Framework::pytorch: return "pytorch";
    case Framework::jax: return "jax";
  }
  return "";
}

Result<NodeJob> plan_nodes(Framework framework, const Setting& nproc_per_node, const std::vector<PeerAddress>& peers,
                           TaskType self_type, int self_index, const HostFacts& facts, const Environment& env) {
  auto job = resolve_nproc_per_node(nproc_per_node, facts, env);
  if (!job) return job;
  job->framework = framework;
  if (framework == Framework::tensorflow) {
    if (job->local_world_size != 1) {
      return usage_error(quoted(nproc_per_node) + " applies to --framework pytorch and jax; a TensorFlow task is one process");
    }
    return job;
  }
  job->nodes = 0;
  bool found = false;
  for (const auto& peer : peers) {
    if (peer.type == TaskType::ps || peer.type == TaskType::evaluator) {
      return usage_error("--framework " + framework_name(framework) + ": the cluster has " + peer.task() +
                         ", but a " + framework_name(framework) + " job has only nodes (chief and workers); drop its " +
                         std::string(to_string(peer.type)) + " tasks");
    }
    if (job->nodes == 0) {
      job->master_addr = peer.name;
      job->master_port = peer.port;
    }
    if (peer.type == self_type && peer.index == self_index) {
      job->node_rank = job->nodes;
      found = true;
    }
    ++job->nodes;
  }
  if (!found || job->nodes == 0) return usage_error("this task is not one of the job's nodes");
  if (static_cast<long long>(job->nodes) * job->local_world_size > 1'000'000) {
    return usage_error(std::to_string(job->nodes) + " nodes of " + std::to_string(job->local_world_size) +
                       " processes are over a million ranks; check --nproc-per-node");
  }
  return job;
}

Result<void> check_interface_settings(const Environment& env, const HostFacts& facts) {
  // NCCL_SOCKET_IFNAME: "eth", "=eth0" (exact), "^docker" (all but), comma-separated prefixes.
  // GLOO_SOCKET_IFNAME: exact names, comma-separated.
  for (const char* name : {"NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"}) {
    auto it = env.find(name);
    if (it == env.end() || it->second.empty() || it->second.starts_with("^")) continue;
    const bool nccl = name[0] == 'N';
    std::string_view list = it->second;
    bool exact = !nccl;
    if (nccl && list.starts_with("=")) {
      exact = true;
      list.remove_prefix(1);
    }
    for (std::string_view wanted : split_non_empty(list, ',')) {
      bool present = std::ranges::any_of(facts.interface_names, [&](const std::string& interface) {
        return exact ? interface == wanted : interface.starts_with(wanted);
      });
      if (present) continue;
      return usage_error(std::string(name) + "='" + it->second + "' names '" + std::string(wanted) +
                         "', which is no interface of this host (it has " + joined(facts.interface_names, ", ") + ")");
    }
  }
  return {};
}

}  // namespace tfboot
