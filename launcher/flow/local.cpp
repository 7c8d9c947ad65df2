// `tfboot local`: every task of --cluster as a process on this machine, supervised as one job.
#include "flow/local.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "base/log.h"
#include "base/text.h"
#include "base/unique_fd.h"
#include "flow/processes.h"
#include "framework/nodes.h"
#include "plan/host_facts.h"
#include "plan/cluster.h"
#include "plan/identity.h"
#include "plan/tf_config.h"
#include "process/child_set.h"
#include "supervise/loop.h"
#include "task/task_files.h"
#include "version.h"

namespace tfboot {
namespace {

using namespace std::chrono_literals;

struct LocalTask {
  TaskType type;
  int index;
  std::string tf_config;
  std::string log_dir;
  int port = 0;
  std::string label() const { return "[" + task_name(type, index) + "] "; }
};

// Free ports on 127.0.0.1: every socket stays bound until all are chosen so no two tasks share one.
Result<std::vector<int>> choose_free_ports(std::size_t count) {
  std::vector<UniqueFd> sockets;
  std::vector<int> ports;
  for (std::size_t i = 0; i < count; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0) sockets.emplace_back(fd);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      int saved = errno;
      return errno_error(exit_code::resources, "cannot find a free port on 127.0.0.1", saved);
    }
    ports.push_back(ntohs(address.sin_port));
  }
  return ports;  // the sockets close here, every port chosen
}

Result<std::vector<LocalTask>> plan_tasks(const Options& options, const ClusterSpec& spec, const std::string& log_root) {
  std::vector<LocalTask> tasks;
  for (TaskType type : all_task_types) {
    for (int index = 0; index < spec.count(type); ++index) tasks.push_back({type, index, "", task_log_dir(log_root, type, index)});
  }
  auto ports = choose_free_ports(tasks.size());
  if (!ports) return std::unexpected(ports.error());
  std::vector<PeerAddress> peers;
  std::vector<std::string> addresses;
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    tasks[i].port = (*ports)[i];
    peers.push_back(PeerAddress{tasks[i].type, tasks[i].index, "127.0.0.1", (*ports)[i], false});
    addresses.push_back(join_host_port("127.0.0.1", (*ports)[i]));
  }
  for (LocalTask& task : tasks) {
    TfConfig config = build_tf_config(peers, addresses, task.type, task.index, options.evaluator_in_cluster);
    if (auto valid = validate_tf_config(config, "generated TF_CONFIG"); !valid) return std::unexpected(valid.error());
    task.tf_config = to_json(config);
  }
  return tasks;
}

// Everything is written before anything starts, so an error leaves no task running. A log dir
// that held an earlier run is said once: its files stay (TensorBoard's, a checkpoint the trainer
// may resume from), and startup.json counts the run in `restarts`.
Result<void> write_all_task_files(const std::vector<LocalTask>& tasks, const std::vector<std::string>& command,
                                  const std::string& log_root) {
  const double now = unix_seconds();
  std::size_t reused = 0;
  int most_restarts = 0;
  for (const LocalTask& task : tasks) {
    StartupReport report{TFBOOT_VERSION_STRING, Identity{task.type, task.index, "tfboot local"}, "127.0.0.1", {}, {}, {}, {},
                         task.tf_config, command, now, 0, now};
    report.local = true;
    report.commit = TFBOOT_COMMIT;
    auto written = write_task_files(task.log_dir, report);
    if (!written) return std::unexpected(written.error());
    if (written->previous.restarts > 0) ++reused;
    most_restarts = std::max(most_restarts, written->previous.restarts);
  }
  if (reused > 0) {
    log::info("reusing {} of {} under {} from an earlier run (startup.json: restarts {}): their files stay, a trainer's "
              "checkpoint there included; another --log-root starts afresh",
              reused, counted(tasks.size(), "log dir"), log_root, most_restarts);
  }
  return {};
}

// One run of every task's processes, from their start to their end, under the same job machine
// as a pod's (docs/deploying.md: tfboot local): the status tfboot exits with, or nullopt when the
// job restarts (`nodes` hold the job's restarts so far and --max-restarts).
Result<std::optional<int>> run_local_tasks(const Options& options, const std::vector<LocalTask>& tasks, const std::vector<NodeJob>& nodes,
                                           const std::vector<std::string>& inherited, const Environment& env,
                                           const std::string& log_root) {
  const std::vector<std::string>& command = options.command.empty() ? default_command : options.command;
  const int restarts = nodes[0].restarts;
  const int max_restarts = nodes[0].max_restarts;
  SupervisorSettings settings;
  settings.machine.stop_grace = options.stop_grace;
  settings.machine.local = true;
  settings.machine.job_decides = true;
  settings.machine.may_restart = restarts < max_restarts;
  settings.machine.max_restarts = max_restarts;
  std::vector<TaskProcesses> launches;
  std::vector<CommandProcess> specs;
  std::vector<JobMember> members;  // the coordinator first: chief:0, else worker:0
  std::vector<std::pair<std::size_t, std::size_t>> owner;  // process -> (task, local process)
  for (std::size_t t = 0; t < tasks.size(); ++t) {
    const LocalTask& task = tasks[t];
    TaskProcesses launch;
    launch.command = command;
    launch.tf_config = options.framework == Framework::tensorflow ? task.tf_config : "";
    launch.log_dir = task.log_dir;
    launch.type = task.type;
    launch.index = task.index;
    launch.host = "127.0.0.1";
    if (options.framework != Framework::tensorflow) launch.extra = {"NCCL_SOCKET_IFNAME=lo", "GLOO_SOCKET_IFNAME=lo"};
    launch.label_prefix = "[" + task_name(task.type, task.index) + " ";
    launch.always_label = true;
    clear_error_files(nodes[t], task.log_dir);
    auto made = command_processes(launch, nodes[t], inherited, env);
    settings.tasks.push_back(task_name(task.type, task.index));
    members.push_back(JobMember{task.type, task.index});
    for (std::size_t p = 0; p < made.size(); ++p) {
      std::string name = task_name(task.type, task.index) + (options.framework == Framework::tensorflow ? "" : " " + made[p].name);
      settings.watched.push_back({t, std::move(name)});
      owner.emplace_back(t, p);
      specs.push_back(std::move(made[p]));
    }
    launches.push_back(std::move(launch));
  }
  settings.failure_detail = [&](std::size_t process, int, const std::string& last_words) {
    auto [t, p] = owner[process];
    return failed_process_detail(nodes[t], launches[t], p, last_words);
  };
  if (specs.size() != tasks.size()) log::info("{} in all, {} per task", counted(specs.size(), "process"), nodes[0].local_world_size);
  LocalJob job(members, JobRules{options.framework != Framework::tensorflow, restarts, max_restarts, false});
  Result<SupervisionEnd> end = [&]() -> Result<SupervisionEnd> {
    // A subreaper: what a task leaves behind comes to us, to be stopped before a restart reuses its
    // ports and before tfboot exits. PID 1 (a container's local job) has them come to it anyway,
    // as supervise() in run.cpp knows; user-mode emulators such as qemu-user refuse the prctl.
    auto children = ChildSet::create(::getpid() != 1);
    if (!children) return std::unexpected(children.error());
    return supervise_processes(**children, specs, &job, settings);
  }();
  end_orphans(options.stop_grace);
  if (!end) return std::unexpected(end.error());
  switch (end->reason) {
    case EndReason::restarting: log::warn("job failed: {}", end->message); return std::optional<int>{};
    case EndReason::job_done: log::info("job done; exiting 0; logs under {}", log_root); break;
    case EndReason::stopped_by_signal: log::info("{}; exiting {}", end->message, end->exit_code); break;
    default: log::error("job failed: {}; exiting {}", end->message, end->exit_code); break;
  }
  return std::optional<int>{end->exit_code};
}

}  // namespace

Result<int> run_local(const Options& options, const Environment& env, const std::vector<std::string>& inherited) {
  if (options.preflight == PreflightLevel::network) {
    return usage_error("tfboot local: --preflight network measures the links between nodes, and one machine has none");
  }
  Setting cluster_setting = options.cluster.value_or(Setting{"worker=2", "default cluster"});
  auto spec = parse_cluster_spec(cluster_setting);
  if (!spec) return std::unexpected(spec.error());
  // The job ends when its coordinator (chief:0, else worker:0) does: without one nothing would.
  if (spec->count(TaskType::chief) + spec->count(TaskType::worker) == 0) {
    return usage_error("tfboot local: " + quoted(cluster_setting) +
                       " has no chief or worker, whose end would end the job; add one (e.g. worker=1)");
  }
  const std::vector<std::string>& command = options.command.empty() ? default_command : options.command;
  const std::string log_root = options.log_root ? options.log_root->value : "./logs";
  auto tasks = plan_tasks(options, *spec, log_root);
  if (!tasks) return std::unexpected(tasks.error());
  if (auto written = write_all_task_files(*tasks, command, log_root); !written) return std::unexpected(written.error());

  // The nodes' view for PyTorch and JAX: chief and workers in order, the first one the master.
  std::vector<PeerAddress> peers;
  for (const LocalTask& task : *tasks) peers.push_back(PeerAddress{task.type, task.index, "127.0.0.1", task.port, false});
  const HostFacts facts = gather_host_facts(options.pod_info_dir.value);
  std::vector<NodeJob> nodes;
  const Setting nproc = options.nproc_per_node;
  for (std::size_t t = 0; t < tasks->size(); ++t) {
    auto node = plan_nodes(options.framework, nproc, peers, (*tasks)[t].type, (*tasks)[t].index, facts, env);
    if (!node) return std::unexpected(node.error());
    node->max_restarts = options.max_restarts;
    nodes.push_back(*node);
  }
  log::info("starting {} of {} on 127.0.0.1; logs under {}", counted(tasks->size(), "task"), cluster_setting.value, log_root);
  for (int restarts = 0;; ++restarts) {
    for (NodeJob& node : nodes) node.restarts = restarts;
    auto status = run_local_tasks(options, *tasks, nodes, inherited, env, log_root);
    if (!status || *status) return status ? Result<int>(**status) : std::unexpected(status.error());
  }
}

}  // namespace tfboot
