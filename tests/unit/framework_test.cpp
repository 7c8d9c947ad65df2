// PyTorch and JAX (docs/frameworks.md: PyTorch and JAX): --nproc-per-node, the nodes of a cluster, each
// process's variables beside torchrun's, the collectives' interface settings, torch's error file.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "framework/environment.h"
#include "framework/error_file.h"
#include "framework/nodes.h"
#include "framework/nproc_per_node.h"
#include "test_support.h"

namespace tfboot {
namespace {

HostFacts host(int gpus, int cpus) {
  HostFacts facts;
  facts.gpu_devices = gpus;
  facts.usable_cpus = cpus;
  facts.interface_names = {"eth0", "lo", "net1"};
  return facts;
}

// "<local world size> (<one per GPU?>)" or "error: <message>".
std::string nproc(const std::string& value, const HostFacts& facts, const Environment& env = {}) {
  auto job = resolve_nproc_per_node(Setting{value, "--nproc-per-node"}, facts, env);
  if (!job) return "error: " + job.error().message;
  return std::to_string(job->local_world_size) + (job->one_process_per_gpu ? " per GPU" : "");
}

std::vector<PeerAddress> peers(std::initializer_list<std::pair<TaskType, int>> tasks) {
  std::vector<PeerAddress> list;
  for (auto [type, index] : tasks) list.push_back(PeerAddress{type, index, "job-" + task_name(type, index), 29500});
  return list;
}

}  // namespace

TEST_CASE("framework::resolve_nproc_per_node means what torchrun's flag means") {
  CHECK(nproc("4", host(0, 2)) == "4");
  CHECK(nproc("gpu", host(8, 2)) == "8 per GPU");
  CHECK(nproc("auto", host(8, 2)) == "8 per GPU");
  CHECK(nproc("auto", host(0, 6)) == "6");
  CHECK(nproc("cpu", host(8, 6)) == "6");
  SUBCASE("CUDA_VISIBLE_DEVICES narrows the GPUs; -1 hides them") {
    CHECK(nproc("gpu", host(8, 2), {{"CUDA_VISIBLE_DEVICES", "0,3"}}) == "2 per GPU");
    CHECK(nproc("auto", host(8, 2), {{"CUDA_VISIBLE_DEVICES", "-1"}}) == "2");
  }
  SUBCASE("bad values are one-line usage errors") {
    CHECK(nproc("gpu", host(0, 2)) ==
          "error: --nproc-per-node 'gpu': this container sees no GPU (no /dev/nvidia<N>, or CUDA_VISIBLE_DEVICES hides them)");
    CHECK(nproc("0", host(0, 2)) == "error: --nproc-per-node '0' must be a number of processes 1..1024, gpu, cpu or auto");
    CHECK(nproc("two", host(0, 2)) == "error: --nproc-per-node 'two' must be a number of processes 1..1024, gpu, cpu or auto");
  }
}

TEST_CASE("framework::plan_nodes: chief and workers in cluster order are the nodes") {
  const Setting two{"2", "--nproc-per-node"};
  auto job = plan_nodes(Framework::pytorch, two, peers({{TaskType::chief, 0}, {TaskType::worker, 0}, {TaskType::worker, 1}}),
                        TaskType::worker, 1, host(0, 2), {});
  REQUIRE(job);
  CHECK(job->node_rank == 2);
  CHECK(job->nodes == 3);
  CHECK(job->world_size() == 6);
  CHECK(job->rank(1) == 5);
  CHECK(job->master_addr == "job-chief:0");
  CHECK(job->master_port == 29500);
  SUBCASE("a TensorFlow task is one process") {
    auto refused = plan_nodes(Framework::tensorflow, two, peers({{TaskType::worker, 0}}), TaskType::worker, 0, host(0, 2), {});
    REQUIRE_FALSE(refused);
    CHECK(refused.error().message ==
          "--nproc-per-node '2' applies to --framework pytorch and jax; a TensorFlow task is one process");
  }
  SUBCASE("ps and evaluator have no place in a pytorch or jax job") {
    auto refused = plan_nodes(Framework::jax, two, peers({{TaskType::worker, 0}, {TaskType::ps, 0}}), TaskType::worker, 0,
                              host(0, 2), {});
    REQUIRE_FALSE(refused);
    CHECK(refused.error().code == exit_code::usage);
    CHECK(refused.error().message ==
          "--framework jax: the cluster has ps:0, but a jax job has only nodes (chief and workers); drop its ps tasks");
  }
}

TEST_CASE("framework::framework_variables") {
  NodeJob job;
  job.framework = Framework::pytorch;
  job.node_rank = 1;
  job.nodes = 2;
  job.local_world_size = 2;
  job.master_addr = "mnist-worker-0.mnist";
  job.master_port = 29500;
  SUBCASE("pytorch: torchrun's worker variables for a static rendezvous") {
    CHECK(framework_variables(job, 1, "/logs/worker_1/error_rank3.json", {}) ==
          std::vector<std::string>{"LOCAL_RANK=1", "RANK=3", "GROUP_RANK=1", "ROLE_RANK=3", "ROLE_NAME=default",
                                   "LOCAL_WORLD_SIZE=2", "WORLD_SIZE=4", "GROUP_WORLD_SIZE=2", "ROLE_WORLD_SIZE=4",
                                   "MASTER_ADDR=mnist-worker-0.mnist", "MASTER_PORT=29500", "TORCHELASTIC_RESTART_COUNT=0",
                                   "TORCHELASTIC_MAX_RESTARTS=0", "TORCHELASTIC_RUN_ID=none", "TORCHELASTIC_USE_AGENT_STORE=False",
                                   "TORCHELASTIC_ERROR_FILE=/logs/worker_1/error_rank3.json",
                                   "TORCHELASTIC_SIGNALS_TO_HANDLE=SIGTERM,SIGINT,SIGHUP,SIGQUIT",
                                   "TORCH_NCCL_ASYNC_ERROR_HANDLING=1", "OMP_NUM_THREADS=1"});
  }
  SUBCASE("the user's TORCH_NCCL_ASYNC_ERROR_HANDLING and OMP_NUM_THREADS win, empty too; one process sets no OMP_NUM_THREADS") {
    auto with_user = framework_variables(job, 0, "e", {{"TORCH_NCCL_ASYNC_ERROR_HANDLING", "3"}, {"OMP_NUM_THREADS", ""}});
    CHECK(std::ranges::none_of(with_user, [](const std::string& entry) {
      return entry.starts_with("TORCH_NCCL_ASYNC_ERROR_HANDLING=") || entry.starts_with("OMP_NUM_THREADS=");
    }));
    job.local_world_size = 1;
    auto single = framework_variables(job, 0, "e", {});
    CHECK(std::ranges::none_of(single, [](const std::string& entry) { return entry.starts_with("OMP_NUM_THREADS="); }));
  }
  SUBCASE("jax: Kubeflow's convention, device ids with one process per GPU") {
    job.framework = Framework::jax;
    CHECK(framework_variables(job, 1, "", {}) ==
          std::vector<std::string>{"JAX_COORDINATOR_ADDRESS=mnist-worker-0.mnist:29500", "JAX_NUM_PROCESSES=4", "JAX_PROCESS_ID=3"});
    job.one_process_per_gpu = true;
    CHECK(framework_variables(job, 1, "", {}).back() == "JAX_LOCAL_DEVICE_IDS=1");
  }
  SUBCASE("tensorflow: none (TF_CONFIG is the task's)") {
    job.framework = Framework::tensorflow;
    CHECK(framework_variables(job, 0, "", {}).empty());
  }
}

TEST_CASE("framework::interface_variables and check_interface_settings") {
  CHECK(interface_variables("net1", {}) == std::vector<std::string>{"NCCL_SOCKET_IFNAME=net1", "GLOO_SOCKET_IFNAME=net1"});
  CHECK(interface_variables("net1", {{"NCCL_SOCKET_IFNAME", "eth"}}) == std::vector<std::string>{"GLOO_SOCKET_IFNAME=net1"});
  const HostFacts facts = host(0, 2);
  CHECK(check_interface_settings({{"NCCL_SOCKET_IFNAME", "eth"}}, facts));        // a prefix, as NCCL reads it
  CHECK(check_interface_settings({{"NCCL_SOCKET_IFNAME", "^docker"}}, facts));    // an exclusion names nothing to find
  CHECK(check_interface_settings({{"GLOO_SOCKET_IFNAME", "eth0,net1"}}, facts));
  auto exact = check_interface_settings({{"NCCL_SOCKET_IFNAME", "=eth"}}, facts);
  REQUIRE_FALSE(exact);
  CHECK(exact.error().message == "NCCL_SOCKET_IFNAME='=eth' names 'eth', which is no interface of this host (it has eth0, lo, net1)");
  auto gloo = check_interface_settings({{"GLOO_SOCKET_IFNAME", "eth"}}, facts);
  REQUIRE_FALSE(gloo);
  CHECK(gloo.error().code == exit_code::usage);
}

TEST_CASE("framework::read_torch_error_message") {
  char path_template[] = "/tmp/tfboot-error-XXXXXX";
  int fd = ::mkstemp(path_template);
  REQUIRE(fd >= 0);
  ::close(fd);
  const std::string path = path_template;
  auto write = [&](const std::string& text) { std::ofstream(path) << text; };
  write(R"({"message": {"message": "RuntimeError: boom\nsecond line", "extraInfo": {"py_callstack": "...", "timestamp": "1"}}})");
  CHECK(read_torch_error_message(path) == "RuntimeError: boom");
  write(R"({"message": "ValueError: old form"})");
  CHECK(read_torch_error_message(path) == "ValueError: old form");
  write("not json");
  CHECK(read_torch_error_message(path) == std::nullopt);
  remove_stale_error_file(path);
  CHECK(read_torch_error_message(path) == std::nullopt);
}

}  // namespace tfboot

namespace tfboot {

TEST_CASE("host_facts::cpu_limit_from reads a container's CPU limit as whole CPUs") {
  CHECK(cpu_limit_from("200000 100000\n", "", "") == 2);
  CHECK(cpu_limit_from("150000 100000", "", "") == 2);  // 1.5 CPUs: rounded up to two
  CHECK(cpu_limit_from("max 100000\n", "", "") == std::nullopt);
  CHECK(cpu_limit_from("", "400000\n", "100000\n") == 4);
  CHECK(cpu_limit_from("", "-1\n", "100000\n") == std::nullopt);
  CHECK(cpu_limit_from("", "", "") == std::nullopt);
}

}  // namespace tfboot
