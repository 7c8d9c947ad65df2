// The job as PyTorch and JAX see it: the tasks are its nodes in cluster order, each runs
// --nproc-per-node processes, the coordinator is the master (docs/frameworks.md: PyTorch and JAX). Pure.
#pragma once

#include <string>
#include <vector>

#include "base/error.h"
#include "base/setting.h"
#include "base/choices.h"
#include "base/setting.h"
#include "plan/cluster.h"
#include "plan/host_facts.h"

namespace tfboot {

// torchrun's default --master-port; JAX has none, and takes the same.
inline constexpr int default_master_port = 29500;

struct NodeJob {
  Framework framework = Framework::tensorflow;
  int node_rank = 0;
  int nodes = 1;
  int local_world_size = 1;  // --nproc-per-node, resolved
  bool one_process_per_gpu = false;  // from gpu, or auto on a host with GPUs
  std::string nproc_source;          // "--nproc-per-node 'gpu' (4 GPUs)", for the log
  std::string master_addr;           // the coordinator's name; its address with --address ip
  int master_port = default_master_port;
  // The job's restarts in place so far and the most it makes (--max-restarts): each process sees
  // them (TFBOOT_RESTART_COUNT; TORCHELASTIC_RESTART_COUNT and _MAX_RESTARTS for PyTorch).
  int restarts = 0;
  int max_restarts = 0;
  int world_size() const { return nodes * local_world_size; }
  int rank(int local_rank) const { return node_rank * local_world_size + local_rank; }
};

// "tensorflow", "pytorch", "jax", as --framework spells them.
std::string framework_name(Framework framework);

// The node view of a planned cluster, with --nproc-per-node resolved (nproc_per_node.h): chief and
// workers in order are the nodes; ps and evaluator
// tasks are a usage error for pytorch and jax, as is more than one process for tensorflow. `self`
// must be one of the peers.
Result<NodeJob> plan_nodes(Framework framework, const Setting& nproc_per_node, const std::vector<PeerAddress>& peers,
                           TaskType self_type, int self_index, const HostFacts& facts, const Environment& env);

// NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME as the user set them must name interfaces this host
// has: a typo would otherwise surface as a hang or a cryptic error inside the first collective.
Result<void> check_interface_settings(const Environment& env, const HostFacts& facts);

}  // namespace tfboot
