// `tfboot local`: every task of --cluster as a process on this machine, supervised as one job.
#include "flow/local.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>

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
#include "process/stop_schedule.h"
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

// One process of a task: a task is one process for TensorFlow, --nproc-per-node for PyTorch and JAX.
struct LocalProcess {
  const LocalTask* task;
  std::string label;  // "[worker:1] ", "[worker:1 rank 3] "
  std::string name;   // "worker:1", "worker:1 rank 3"
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

// The job's rules, as job supervision applies them across pods (docs/deploying.md: tfboot local).
struct LocalJob {
  ChildSet& children;
  const std::vector<LocalProcess>& processes;
  StopSchedule stop;
  std::function<std::string(std::size_t)> failure_detail;  // a failed rank's own account, or ""
  bool coordinator_ends_job = true;  // TensorFlow's chief; PyTorch and JAX wait for every rank
  std::optional<int> result;
  std::string outcome;                    // why the job ends, for the closing line
  bool ended_by_signal = false;           // a user's Ctrl-C or SIGTERM decided, not a task
  bool asked_to_stop = false;             // a Ctrl-C or SIGTERM came, even after a task failed: no restart
  std::vector<int> sent = std::vector<int>(processes.size(), 0);  // the last signal tfboot sent each process
  int stop_requests = 0;

  std::string running_tasks() const {
    std::string names;
    for (std::size_t i = 0; i < processes.size(); ++i) {
      if (children.running(i)) names += (names.empty() ? "" : ", ") + processes[i].name;
    }
    return names;
  }
  void signal_running(int signal_number) {
    for (std::size_t i = 0; i < processes.size(); ++i) {
      if (!children.running(i)) continue;
      children.signal(i, signal_number);
      sent[i] = signal_number;
    }
  }
  // The coordinator (chief:0, else worker:0: the first task in TF_CONFIG order) has ended, all of
  // its processes.
  bool coordinator_ended() const {
    for (std::size_t i = 0; i < processes.size(); ++i) {
      if (processes[i].task == processes[0].task && children.running(i)) return false;
    }
    return true;
  }
  // `signal_number` now (SIGTERM, or the user's SIGINT as it is), SIGKILL after --stop-grace.
  void stop_now(int signal_number) {
    const std::string waiting_for = running_tasks();
    signal_running(signal_number);
    stop.terminated(SteadyClock::now());
    if (!waiting_for.empty()) {
      log::info("waiting up to {} (--stop-grace) for {} to end after {}; Ctrl-C again to kill now",
                seconds_text(stop.grace()), waiting_for, signal_name(signal_number));
    }
  }
  void on_signal(int signal_number) {
    // Ctrl-C and SIGTERM stop the job; every other signal, SIGHUP included, is the tasks' own
    // (docs/deploying.md: tfboot local), as an init passes them on.
    if (signal_number != SIGTERM && signal_number != SIGINT) {
      children.signal_running(signal_number);
      return;
    }
    asked_to_stop = true;
    if (++stop_requests >= 2) {
      log::warn("second stop signal: killing {} now", running_tasks());
      signal_running(SIGKILL);
      return;
    }
    log::info("{}: stopping all tasks", signal_name(signal_number));
    if (!result) {
      result = exit_code::signal_base + signal_number;
      outcome = "stopped by " + signal_name(signal_number);
      ended_by_signal = true;
    }
    stop_now(signal_number);
  }
  void on_exit(std::size_t child, int status) {
    const LocalProcess& process = processes[child];
    const bool stopped_by_us = sent[child] != 0 && status == exit_code::signal_base + sent[child];
    if (stopped_by_us) log::info("{}stopped by tfboot ({})", process.label, signal_name(sent[child]));
    else log::info("{}exited with status {}", process.label, status);
    if (result) return;
    if (status != 0) {
      result = status;
      const std::string detail = failure_detail ? failure_detail(child) : "";
      outcome = process.name + " exited with status " + std::to_string(status) + (detail.empty() ? "" : ": " + detail);
      log::error("{}failed{}{}; stopping the other tasks", process.label, detail.empty() ? "" : ": ", detail);
      stop_now(SIGTERM);
    } else if (coordinator_ends_job && process.task == processes[0].task && coordinator_ended() && children.any_running()) {
      result = exit_code::ok;
      log::info("[{}] is done, and so is the job: the other tasks end within {}",
                task_name(process.task->type, process.task->index), seconds_text(finish_window));
      stop.terminate_at(SteadyClock::now() + finish_window);
    }
  }
  void on_time() {
    const Instant now = SteadyClock::now();
    for (auto step = stop.due(now); step != StopSchedule::Step::none; step = stop.due(now)) {
      if (step == StopSchedule::Step::terminate) {
        stop_now(SIGTERM);
      } else {
        log::warn("killing {} (SIGKILL): still running {} after the stop", running_tasks(), seconds_text(stop.grace()));
        signal_running(SIGKILL);
      }
    }
  }
  // A task failed (not a stop signal): the job restarts in place if it has restarts left.
  bool failed() const { return result.value_or(exit_code::ok) != exit_code::ok && !asked_to_stop; }
  // One line that says how the run ended and with which status tfboot exits.
  void say_how_it_ended(const std::string& log_root) const {
    const int status = result.value_or(exit_code::ok);
    if (status == exit_code::ok) log::info("job done; exiting 0; logs under {}", log_root);
    else if (ended_by_signal) log::info("{}; exiting {}", outcome, status);
    else log::error("job failed: {}; exiting {}", outcome, status);
  }
};

// The status tfboot exits with, or nullopt when a task failed and the job has a restart left
// (`restart`: its count with this one; `max_restarts`, --max-restarts).
std::optional<int> supervise_tasks(ChildSet& children, const std::vector<LocalProcess>& processes, std::chrono::milliseconds stop_grace,
                                   const std::string& log_root, std::function<std::string(std::size_t)> failure_detail,
                                   bool coordinator_ends_job, int restart, int max_restarts) {
  LocalJob job{children, processes, StopSchedule(stop_grace), std::move(failure_detail)};
  job.coordinator_ends_job = coordinator_ends_job;
  std::vector<pollfd> none;
  // Until every task's end has been handled, not just reaped: tasks that end together are
  // reaped in one wake-up, and each one's status still counts (a failure among them decides).
  while (children.any_running() || children.has_pending_events()) {
    ChildSet::Event event = children.wait(job.stop.next(), none);
    if (event.kind == ChildSet::Event::Kind::signal) job.on_signal(event.signal_number);
    if (event.kind == ChildSet::Event::Kind::exited) job.on_exit(event.child, event.exit_code);
    job.on_time();
  }
  children.drain_output(1s);
  if (job.failed() && restart <= max_restarts) {
    log::warn("job failed: {}; restarting every task in place ({}, --max-restarts)", job.outcome, restart_of(restart, max_restarts));
    return std::nullopt;
  }
  job.say_how_it_ended(log_root);
  return job.result.value_or(exit_code::ok);
}

// One run of every task's processes, from their start to their end: the status tfboot exits with,
// or nullopt when the job restarts (`nodes` hold the job's restarts so far and --max-restarts).
Result<std::optional<int>> run_local_tasks(const Options& options, const std::vector<LocalTask>& tasks, const std::vector<NodeJob>& nodes,
                                           const std::vector<std::string>& inherited, const Environment& env,
                                           const std::string& log_root) {
  const std::vector<std::string>& command = options.command.empty() ? default_command : options.command;
  std::vector<TaskProcesses> launches;
  std::vector<LocalProcess> processes;
  std::vector<CommandProcess> specs;
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
    for (std::size_t p = 0; p < made.size(); ++p) {
      std::string name = task_name(task.type, task.index) + (options.framework == Framework::tensorflow ? "" : " " + made[p].name);
      processes.push_back(LocalProcess{&task, made[p].spec.output_label, name});
      owner.emplace_back(t, p);
      specs.push_back(std::move(made[p]));
    }
    launches.push_back(std::move(launch));
  }
  auto children = ChildSet::create(false);
  if (!children) return std::unexpected(children.error());
  if (specs.size() != tasks.size()) log::info("{} in all, {} per task", counted(specs.size(), "process"), nodes[0].local_world_size);
  for (const CommandProcess& process : specs) {
    // On failure the ChildSet's destructor stops and reaps the tasks already started.
    if (auto started = (*children)->start(process.spec); !started) return std::unexpected(started.error());
  }
  auto detail = [&](std::size_t process) {
    auto [t, p] = owner[process];
    return failed_process_detail(nodes[t], launches[t], p);
  };
  return supervise_tasks(**children, processes, options.stop_grace, log_root, detail, options.framework == Framework::tensorflow,
                         nodes[0].restarts + 1, nodes[0].max_restarts);
}

}  // namespace

Result<int> run_local(const Options& options, const Environment& env, const std::vector<std::string>& inherited) {
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
  const HostFacts facts = gather_host_facts(options);
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
