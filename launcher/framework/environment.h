// The variables each process of the command gets for its framework: torchrun's for PyTorch,
// Kubeflow's JAX convention for JAX (docs/frameworks.md: PyTorch and JAX). Pure.
#pragma once

#include <string>
#include <vector>

#include "base/setting.h"
#include "framework/nodes.h"

namespace tfboot {

// torchrun's --rdzv-id default: no job names a run id of its own.
inline constexpr const char* torch_run_id = "none";

// "KEY=value" entries for process `local_rank` of this node; they replace inherited ones of the
// same name. `error_file`: where torch's @record writes the rank's error (PyTorch only). `env`:
// the inherited environment, whose TORCH_NCCL_ASYNC_ERROR_HANDLING and OMP_NUM_THREADS win.
std::vector<std::string> framework_variables(const NodeJob& job, int local_rank, const std::string& error_file,
                                             const Environment& env);

// NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME naming `interface`, each unless the user set it.
std::vector<std::string> interface_variables(const std::string& interface, const Environment& env);

}  // namespace tfboot
