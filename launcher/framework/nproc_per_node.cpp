// --nproc-per-node: a number, or the GPUs or CPUs counted (nproc_per_node.h).
#include "framework/nproc_per_node.h"

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

}  // namespace tfboot
