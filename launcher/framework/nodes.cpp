// The job as PyTorch and JAX see it (nodes.h).
#include "framework/nodes.h"

#include <algorithm>
#include <charconv>

#include "base/text.h"

namespace tfboot {
namespace {

// The GPUs a CUDA process would see: the device nodes, narrowed by CUDA_VISIBLE_DEVICES (which
// lists indexes or UUIDs; CUDA stops at the first entry it cannot use, "-1" hides every GPU).
int visible_gpus(const HostFacts& facts, const Environment& env) {
  auto it = env.find("CUDA_VISIBLE_DEVICES");
  if (it == env.end()) return facts.gpu_devices;
  int listed = 0;
  for (std::string_view entry : split_non_empty(it->second, ',')) {
    if (entry.starts_with("-")) break;
    ++listed;
  }
  return std::min(listed, facts.gpu_devices);
}

}  // namespace

std::string framework_name(Framework framework) {
  switch (framework) {
    case Framework::tensorflow: return "tensorflow";
    case Framework::pytorch: return "pytorch";
    case Framework::jax: return "jax";
  }
  return "";
}

Result<NodeJob> resolve_nproc_per_node(const Setting& setting, const HostFacts& facts, const Environment& env) {
  NodeJob job;
  const int gpus = visible_gpus(facts, env);
  const std::string& value = setting.value;
  if (value == "gpu" || (value == "auto" && gpus > 0)) {
    if (gpus == 0) {
      return usage_error(quoted(setting) + ": this container sees no GPU (no /dev/nvidia<N>, or CUDA_VISIBLE_DEVICES hides them)");
    }
    job.local_world_size = gpus;
    job.one_process_per_gpu = true;
    job.nproc_source = quoted(setting) + ": " + counted(static_cast<std::size_t>(gpus), "GPU");
  } else if (value == "cpu" || value == "auto") {
    job.local_world_size = facts.usable_cpus;
    job.nproc_source = quoted(setting) + ": " + counted(static_cast<std::size_t>(facts.usable_cpus), "usable CPU");
  } else {
    int number = 0;
    auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), number);
    if (error != std::errc{} || end != value.data() + value.size() || number < 1 || number > max_nproc_per_node) {
      return usage_error(quoted(setting) + " must be a number of processes 1.." + std::to_string(max_nproc_per_node) +
                         ", gpu, cpu or auto");
    }
    job.local_world_size = number;
    job.nproc_source = quoted(setting);
  }
  job.local_world_size = std::min(job.local_world_size, max_nproc_per_node);
  return job;
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
