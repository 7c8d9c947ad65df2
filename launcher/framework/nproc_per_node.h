// --nproc-per-node resolved on this host (docs/frameworks.md: PyTorch and JAX): a number as
// given, or counted here: gpu (the GPUs the container sees), cpu (the CPUs tfboot may run on, as
// plan/host_facts.cpp counts them) or auto. Pure.
#pragma once

#include "base/error.h"
#include "base/setting.h"
#include "framework/nodes.h"
#include "plan/host_facts.h"

namespace tfboot {

// Past this many processes in one pod, "--nproc-per-node 1000" is a typo, not a plan.
inline constexpr int max_nproc_per_node = 1024;

// --nproc-per-node as torchrun reads it: a number, gpu (the GPUs the container sees; none is an
// error), cpu (the CPUs tfboot may run on) or auto (gpu when there are GPUs, else cpu).
// CUDA_VISIBLE_DEVICES, when set, narrows the GPUs to those it lists.
Result<NodeJob> resolve_nproc_per_node(const Setting& setting, const HostFacts& facts, const Environment& env);

}  // namespace tfboot
