// The variables each process of the command gets for its framework (environment.h).
#include "framework/environment.h"

#include "base/text.h"

namespace tfboot {
namespace {

std::string entry(const char* name, const std::string& value) { return std::string(name) + "=" + value; }
std::string entry(const char* name, int value) { return entry(name, std::to_string(value)); }

// Present, even empty: torchrun keeps what the environment has, "" included.
bool is_set(const Environment& env, const char* name) { return env.contains(name); }

// What torchrun's agent gives each worker it starts with a static rendezvous, key by key (torch's
// elastic agent, _start_workers), but for the store: tfboot hosts no TCPStore, so rank 0 does, as
// init_process_group does without an agent (TORCHELASTIC_USE_AGENT_STORE=False).
std::vector<std::string> torch_variables(const NodeJob& job, int local_rank, const std::string& error_file, const Environment& env) {
  const int rank = job.rank(local_rank);
  std::vector<std::string> variables{
      entry("LOCAL_RANK", local_rank),
      entry("RANK", rank),
      entry("GROUP_RANK", job.node_rank),
      entry("ROLE_RANK", rank),
      entry("ROLE_NAME", "default"),
      entry("LOCAL_WORLD_SIZE", job.local_world_size),
      entry("WORLD_SIZE", job.world_size()),
      entry("GROUP_WORLD_SIZE", job.nodes),
      entry("ROLE_WORLD_SIZE", job.world_size()),
      entry("MASTER_ADDR", job.master_addr),
      entry("MASTER_PORT", job.master_port),
      entry("TORCHELASTIC_RESTART_COUNT", job.restarts),
      entry("TORCHELASTIC_MAX_RESTARTS", job.max_restarts),
      entry("TORCHELASTIC_RUN_ID", torch_run_id),
      entry("TORCHELASTIC_USE_AGENT_STORE", "False"),
      entry("TORCHELASTIC_ERROR_FILE", error_file),
  };
  // torchrun's launcher sets this in its own environment, and its workers inherit it.
  if (!is_set(env, "TORCHELASTIC_SIGNALS_TO_HANDLE")) variables.push_back(entry("TORCHELASTIC_SIGNALS_TO_HANDLE", "SIGTERM,SIGINT,SIGHUP,SIGQUIT"));
  if (!is_set(env, "TORCH_NCCL_ASYNC_ERROR_HANDLING")) variables.push_back(entry("TORCH_NCCL_ASYNC_ERROR_HANDLING", 1));
  // torchrun's rule: several processes on one node would otherwise each start a thread per core.
  if (job.local_world_size > 1 && !is_set(env, "OMP_NUM_THREADS")) variables.push_back(entry("OMP_NUM_THREADS", 1));
  return variables;
}

// Kubeflow Trainer's JAX runtime convention, which users pass to jax.distributed.initialize.
std::vector<std::string> jax_variables(const NodeJob& job, int local_rank) {
  std::vector<std::string> variables{
      entry("JAX_COORDINATOR_ADDRESS", join_host_port(job.master_addr, job.master_port)),
      entry("JAX_NUM_PROCESSES", job.world_size()),
      entry("JAX_PROCESS_ID", job.rank(local_rank)),
  };
  if (job.one_process_per_gpu) variables.push_back(entry("JAX_LOCAL_DEVICE_IDS", local_rank));
  return variables;
}

}  // namespace

std::vector<std::string> framework_variables(const NodeJob& job, int local_rank, const std::string& error_file,
                                             const Environment& env) {
  switch (job.framework) {
    case Framework::pytorch: return torch_variables(job, local_rank, error_file, env);
    case Framework::jax: return jax_variables(job, local_rank);
    case Framework::tensorflow: break;
  }
  return {};
}

std::vector<std::string> interface_variables(const std::string& interface, const Environment& env) {
  std::vector<std::string> variables;
  for (const char* name : {"NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"}) {
    if (!is_set(env, name)) variables.push_back(entry(name, interface));
  }
  return variables;
}

}  // namespace tfboot
