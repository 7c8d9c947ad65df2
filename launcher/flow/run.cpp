// The flow README.md draws under "How it works", top to bottom: options, host facts, identity and peers,
// DNS wait, TF_CONFIG, files, command. Each step is a named function; details live in modules.
#include "flow/run.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <new>
#include <optional>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/files.h"
#include "base/log.h"
#include "cli/options.h"
#include "control/relay.h"
#include "dns/resolver.h"
#include "flow/job.h"
#include "flow/local.h"
#include "flow/observed.h"
#include "flow/peer_dns.h"
#include "flow/preflight.h"
#include "flow/processes.h"
#include "framework/environment.h"
#include "framework/interface.h"
#include "framework/nodes.h"
#include "observe/phase_clock.h"
#include "observe/termination_log.h"
#include "plan/host_facts.h"
#include "plan/kubernetes.h"
#include "plan/plan.h"
#include "process/child_set.h"
#include "process/exec.h"
#include "process/stop_signals.h"
#include "supervise/loop.h"
#include "task/task_files.h"
#include "version.h"

namespace tfboot {
namespace {

std::string command_text(const std::vector<std::string>& command) {
  return nlohmann::json(command).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The PTR lookup and the peer wait share one --wait; the PTR gets at least a few seconds, as a
// compose container's record may lag its start even with --wait 0.
// A dry run (--print) waits for nothing but this task's own PTR name, the few seconds it gets.
Instant ptr_deadline(const Options& options, Instant started) {
  const std::chrono::milliseconds wait = options.print ? std::chrono::milliseconds(0) : options.wait;
  return started + std::max<std::chrono::milliseconds>(wait, std::chrono::seconds(5));
}

Result<std::optional<Setting>> find_ptr_name_if_needed(const Options& options, const PlanInputs& parsed, const HostFacts& facts,
                                                       Instant started) {
  if (!needs_own_ptr_name(options)) return std::optional<Setting>{};
  auto found = find_own_ptr_name(options, parsed.dns_servers, facts, ptr_deadline(options, started));
  if (!found) return std::unexpected(found.error());
  return std::optional<Setting>{*found};
}

void announce(const Plan& plan) {
  log::set_task(plan.identity.task());
  for (const auto& warning : plan.warnings) log::warn("{}", warning);
  log::info("identity {} from {}", plan.identity.task(), plan.identity.source);
  if (plan.suffix) log::info("peers are in Service {}", plan.suffix->text());
}

// The servers every lookup of this task goes to (--dns-server, else resolv.conf's), as c-ares
// reads them: for startup.json when the coordinator's lookups all come after the start barrier.
Result<std::vector<std::string>> dns_servers_in_use(const Options& options, const Plan& plan, const HostFacts& facts) {
  auto resolver = make_cares_resolver(resolver_settings(options, plan.dns_servers, facts, false));
  if (!resolver) return std::unexpected(resolver.error());
  return (*resolver)->servers();
}

// Every peer's name; in a job with the control channel only the coordinator's, as the
// coordinator resolves every name once all tasks are present. One answer per peer either way, in
// cluster order (those not asked are not resolved).
Result<DnsResult> wait_for_dns(const Options& options, const Plan& plan, const HostFacts& facts,
                               Instant started) {
  if (options.wait.count() == 0) {
    log::info("DNS wait is off (--wait 0)");
    return DnsResult{};
  }
  if (!job_supervision_applies(options, plan)) return wait_for_peers(options, plan.dns_servers, plan.peers, plan.identity, facts, started + options.wait);
  auto peers = peers_to_resolve_before_the_barrier(plan);
  if (peers.empty()) {
    log::info("DNS: as the coordinator, resolving every name once all tasks are present");
    auto servers = dns_servers_in_use(options, plan, facts);
    if (!servers) return std::unexpected(servers.error());
    return DnsResult{.names = answers_from_table(plan, {}, false, {}), .servers = std::move(*servers)};
  }
  // Finding the coordinator is part of the start: its name is waited for as long as the barrier
  // would wait for the coordinator (--start-timeout, or --wait when that is longer).
  const auto budget = std::max(options.wait, options.start_timeout);
  auto dns = wait_for_peers(options, plan.dns_servers, peers, plan.identity, facts, started + budget, coordinator_position(plan, peers));
  if (dns) dns->names = answers_from_table(plan, dns->names, false, {});
  return dns;
}

// After the start of a job with the control channel: the coordinator's verified table completes
// the answers; without one (the coordinator ran with --wait 0) this task waits for every name
// itself, as without the control channel.
Result<void> complete_dns_after_the_start(const Options& options, const Plan& plan, const HostFacts& facts,
                                          const JobMembership& job, DnsResult& dns) {
  if (options.wait.count() == 0 || !job.joined) return {};
  if (job.names_verified) {
    dns.names = answers_from_table(plan, dns.names, true, job.verified_addresses);
    return {};
  }
  log::info("the coordinator did not resolve the job's names; resolving them here");
  auto all = wait_for_peers(options, plan.dns_servers, plan.peers, plan.identity, facts, SteadyClock::now() + options.wait);
  if (!all) return std::unexpected(all.error());
  dns.names = std::move(all->names);
  return {};
}

// --print, a dry run: at once and without a lookup (docs/command-line.md), from the plan alone.
// TensorFlow: the one process's TF_CONFIG, with the names (--address ip puts in addresses only
// after the DNS wait). PyTorch and JAX: for each process of this node, the variables tfboot sets
// (the rest of the environment passes unchanged), as "KEY=value" lines after a "# rank" line.
Result<int> print_dry_run(const Options& options, const Plan& plan, NodeJob nodes, const Environment& env) {
  if (options.address == AddressMode::ip) log::warn("--print looks nothing up: the names stand where --address ip puts addresses");
  auto tf_config = make_tf_config_text(options, plan, {});
  if (!tf_config) return std::unexpected(tf_config.error());
  std::string text = *tf_config + "\n";
  if (nodes.framework != Framework::tensorflow) {
    nodes.max_restarts = options.max_restarts;
    TaskProcesses task;
    task.command = options.command.empty() ? default_command : options.command;
    task.log_dir = task_log_dir(options.log_root ? options.log_root->value : "/logs", plan.identity.type, plan.identity.index);
    task.type = plan.identity.type;
    task.index = plan.identity.index;
    task.host = plan.hostname.name;
    text.clear();
    const std::vector<CommandProcess> processes = command_processes(task, nodes, {}, env);
    for (int local_rank = 0; local_rank < static_cast<int>(processes.size()); ++local_rank) {
      text += (local_rank == 0 ? "" : "\n") + std::string("# rank ") + std::to_string(nodes.rank(local_rank)) + " of " +
              std::to_string(nodes.world_size()) + ": " + plan.identity.task() + ", local rank " + std::to_string(local_rank) + "\n";
      for (const std::string& entry : processes[static_cast<std::size_t>(local_rank)].spec.environment) text += entry + "\n";
    }
    log::info("the collectives' interface (NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME) is chosen after the DNS wait: not shown");
  }
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
  return exit_code::ok;
}

struct Launch {
  TaskProcesses task;
  std::vector<CommandProcess> processes;
  TaskFiles files;  // startup.json as written, for the end record
};

// The node view for PyTorch and JAX, checked before any lookup: no ps or evaluator, a valid
// --nproc-per-node, collective interfaces that exist.
Result<NodeJob> plan_framework(const Plan& plan, const HostFacts& facts, const Environment& env) {
  auto nodes = plan_nodes(plan.framework, plan.nproc_per_node, plan.peers, plan.identity.type, plan.identity.index, facts, env);
  if (!nodes || plan.framework == Framework::tensorflow) return nodes;
  if (auto interfaces = check_interface_settings(env, facts); !interfaces) return std::unexpected(interfaces.error());
  log::info("{}: node {} of {}, {} per node ({}), ranks {}..{} of {}; master {}", framework_name(plan.framework), nodes->node_rank,
            nodes->nodes, counted(static_cast<std::size_t>(nodes->local_world_size), "process"), nodes->nproc_source,
            nodes->rank(0), nodes->rank(nodes->local_world_size - 1), nodes->world_size(),
            join_host_port(nodes->master_addr, nodes->master_port));
  return nodes;
}

// After the DNS wait: the master's address for --address ip, and the interface whose route
// reaches it for the collectives (NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME).
std::vector<std::string> settle_master(const Options& options, const Environment& env, const HostFacts& facts,
                                       const DnsResult& dns, NodeJob& nodes) {
  if (nodes.framework == Framework::tensorflow) return {};
  const std::vector<std::string> master_addresses = dns.names.empty() ? std::vector<std::string>{} : dns.names.front().addresses;
  if (options.address == AddressMode::ip && !master_addresses.empty()) nodes.master_addr = master_addresses.front();
  auto interface = interface_towards(master_addresses, facts);
  if (!interface) {
    log::info("the collectives' interface is left to the framework: the master's address is not known here");
    return {};
  }
  log::info("collectives: interface {} reaches the master (NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME unless set)", *interface);
  return interface_variables(*interface, env);
}

// From here a stop signal waits until the files are whole: the supervisor passes it on to the
// command, or, for exec, it ends us just before the command would start.
// startup.json's "framework": the node's place in a PyTorch or JAX job; "" for TensorFlow.
std::string framework_summary_json(const NodeJob& nodes, const std::vector<std::string>& interface_entries) {
  if (nodes.framework == Framework::tensorflow) return "";
  nlohmann::ordered_json summary;
  summary["name"] = framework_name(nodes.framework);
  summary["node_rank"] = nodes.node_rank;
  summary["nodes"] = nodes.nodes;
  summary["nproc_per_node"] = nodes.local_world_size;
  summary["world_size"] = nodes.world_size();
  summary["master"] = join_host_port(nodes.master_addr, nodes.master_port);
  summary["collectives_interface"] = interface_entries;
  return summary.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Result<Launch> write_files(const Options& options, const Plan& plan, const DnsResult& dns, const std::string& tf_config,
                           const JobMembership& job, const std::vector<std::string>& inherited, double started_at,
                           const NodeJob& nodes, const std::vector<std::string>& interface_entries, const Environment& env) {
  if (auto held = hold_stop_signals(); !held) return std::unexpected(held.error());
  Launch launch;
  launch.task.command = options.command.empty() ? default_command : options.command;
  const std::string log_dir =
      task_log_dir(options.log_root ? options.log_root->value : "/logs", plan.identity.type, plan.identity.index);
  StartupReport report{TFBOOT_VERSION_STRING, plan.identity, plan.hostname.name, plan.peers, dns.names, dns.servers,
                       dns.warnings, tf_config, launch.task.command, started_at, dns.seconds, unix_seconds(), job.summary_json};
  for (const auto& difference : job.environment_differences) report.warnings.push_back("environment differs: " + difference);
  report.framework_json = framework_summary_json(nodes, interface_entries);
  report.preflight_json = job.preflight_json;
  report.commit = TFBOOT_COMMIT;
  auto written = write_task_files(log_dir, report);
  if (!written) {
    const std::string root = options.log_root ? quoted(*options.log_root)
                                              : "the default --log-root '/logs' (mount a volume there, or set --log-root or TFBOOT_LOG_ROOT)";
    return make_error(written.error().code, written.error().message + "; the log dir is under " + root);
  }
  launch.files = std::move(*written);
  log::info("log dir {}", log_dir);
  launch.task.tf_config = nodes.framework == Framework::tensorflow ? tf_config : "";
  launch.task.log_dir = log_dir;
  launch.task.type = plan.identity.type;
  launch.task.index = plan.identity.index;
  launch.task.host = plan.hostname.name;
  launch.task.extra = interface_entries;
  clear_error_files(nodes, log_dir);
  launch.processes = command_processes(launch.task, nodes, inherited, env);
  return launch;
}

// Several processes need a supervisor, whether or not tfboot is PID 1; so does a job with the
// control channel (srun, a pod with shareProcessNamespace: tfboot is not PID 1 there, and a failed
// task must still stop the others). Not PID 1, tfboot then reaps as a child subreaper.
bool runs_as_init(const Options& options, const Plan& plan, const NodeJob& nodes) {
  return options.init.value_or(::getpid() == 1 || job_supervision_applies(options, plan)) || nodes.local_world_size > 1;
}

// What only a supervising tfboot can do, asked of one that execs its command: said once, as
// --metrics-port is (observed.h), rather than dropped in silence.
void warn_of_init_only_settings(const Options& options, bool as_init) {
  if (as_init || options.print) return;
  if (options.max_restarts > 0) {
    log::warn("--max-restarts (TFBOOT_MAX_RESTARTS) restarts from the supervising tfboot only (init mode: PID 1 or --init); "
              "this task execs its command, so it is not restarted in place");
  }
  if (options.idle_when_done) {
    log::warn("--idle-when-done (TFBOOT_IDLE_WHEN_DONE) idles in the supervising tfboot only (init mode: PID 1 or --init); "
              "this task execs its command, so it ends when the command does");
  }
}

Result<JobMembership> pass_start_barrier_if_supervised(const Options& options, const Environment& env, const Plan& plan,
                                             const HostFacts& facts, const std::optional<std::string>& secret,
                                             const NodeJob& nodes, Instant started, int restarts) {
  if (job_supervision_applies(options, plan)) {
    return pass_start_barrier(options, env, plan, facts, secret, runs_as_init(options, plan, nodes), started, restarts,
                              nodes.framework == Framework::tensorflow ? 0 : nodes.local_world_size);
  }
  // No other task to start with: the job is this task, and its restarts are counted here.
  JobMembership alone;
  if (options.preflight != PreflightLevel::off && !options.print) {
    const Fingerprint own = read_fingerprint(env, options.command.empty() ? default_command : options.command);
    const PreflightRecord preflight = check_this_node(options, own);
    if (auto judged = judge_alone(preflight, plan.identity.task(), plan.hostname.name); !judged) {
      observe_preflight(preflight, false, judged.error().message);
      return std::unexpected(judged.error());
    }
    log_preflight(preflight);
    alone.preflight_json = preflight_json(preflight);
    observe_preflight(preflight, true);
  }
  alone.restarts = restarts;
  alone.max_restarts = runs_as_init(options, plan, nodes) && !options.print ? options.max_restarts : 0;
  return alone;
}

// startup.json's end record, at exit in init mode (exec mode has no "after"). A failure to write
// costs the record, not the status.
void record_end(const Launch& launch, const SupervisionEnd& end) {
  TaskEnd record{.exit_status = end.exit_code, .reason = std::string(to_string(end.reason)), .message = end.message,
                 .failed_task = end.failed_task};
  if (auto recorded = record_task_end(launch.files, std::move(record)); !recorded) {
    log::warn("startup.json: the task's end is not recorded: {}", recorded.error().message);
  }
}

// The supervisor's rules for this task: the job's verdict comes from the coordinator over the
// link, or, for a task alone with --max-restarts, from the job decided here.
SupervisorSettings supervisor_settings(const Options& options, const Launch& launch, const NodeJob& nodes, const JobMembership& job) {
  SupervisorSettings settings;
  settings.machine.stop_grace = options.stop_grace;
  settings.machine.job_decides = job.link != nullptr || job.max_restarts > 0;
  settings.machine.may_restart = job.restarts < job.max_restarts;
  settings.machine.max_restarts = job.max_restarts;
  settings.machine.stop_together = job.link && job.link->start_info().stop_together;
  settings.tasks = {task_name(launch.task.type, launch.task.index)};
  for (const CommandProcess& process : launch.processes) settings.watched.push_back({0, process.name});
  settings.failure_detail = [&nodes, &launch](std::size_t process, int, const std::string& last_words) {
    return failed_process_detail(nodes, launch.task, process, last_words);
  };
  return settings;
}

// Init mode: the command's processes under supervision, until they end or the job restarts. The
// ChildSet (and its hold on the signals) lasts one run, so that a stop signal during a restart's
// barrier ends tfboot as one before the first start does.
Result<SupervisionEnd> supervise(const Options& options, const Launch& launch, const NodeJob& nodes, JobMembership& job) {
  // Not PID 1 (--init): a subreaper, so orphans of the command still come to us to be reaped.
  auto children = ChildSet::create(::getpid() != 1);
  if (!children) return std::unexpected(children.error());
  std::unique_ptr<Job> linked = job.link ? make_linked_job(*job.link) : nullptr;
  std::optional<LocalJob> alone;
  if (!job.link && job.max_restarts > 0) {
    alone.emplace(std::vector<JobMember>{JobMember{launch.task.type, launch.task.index}},
                  JobRules{false, job.restarts, job.max_restarts, false});
  }
  Job* verdicts = linked ? linked.get() : alone ? &*alone : nullptr;
  auto end = supervise_processes(**children, launch.processes, verdicts, supervisor_settings(options, launch, nodes, job));
  if (!end) return end;
  // A restart keeps the channel until the command is stopped; the caller closes it then.
  if (job.link && end->reason != EndReason::restarting) job.link->finish(std::chrono::seconds(5));
  if (end->reason != EndReason::restarting) log::info("exiting {}: {}", end->exit_code, end->message);
  record_end(launch, *end);
  observe_end(*end);
  return end;
}

// Between two runs of a restart in place a stop signal ends tfboot from its handler: startup.json
// then says so as well as the termination message does (stop_signals.h: StopRecord).
void arm_the_end_between_runs(const Launch& launch) {
  auto opened = open_temporary(launch.files.startup_path);
  if (!opened) {
    log::warn("startup.json: a stop signal before the next run would not be recorded: {}", opened.error().message);
    return;
  }
  StopRecord record{.path = launch.files.startup_path, .temporary = opened->second, .fd = opened->first.release(), .parts = {}};
  for (int signal_number : {SIGTERM, SIGINT}) {
    TaskEnd end{.exit_status = exit_code::signal_base + signal_number, .reason = "stopped_by_signal", .message = stopped_between_runs};
    record.parts[signal_number == SIGINT] = startup_json_around_the_end(launch.files, std::move(end));
    if (record.parts[signal_number == SIGINT][0].empty()) {  // not rendered: keep the earlier file whole
      ::close(record.fd);
      ::unlink(record.temporary.c_str());
      return;
    }
  }
  arm_stop_record(std::move(record));
}

// Exec mode replaces tfboot with the command; init mode supervises it (nullopt: the job restarts).
Result<std::optional<int>> run_command(const Options& options, const Launch& launch, const NodeJob& nodes, JobMembership& job,
                                       bool as_init) {
  if (launch.processes.size() > 1) {
    log::info("running {} processes of {} (supervised as init)", launch.processes.size(), command_text(launch.task.command));
  } else {
    log::info("running {} ({})", command_text(launch.task.command),
              !as_init ? "exec" : ::getpid() == 1 ? "supervised as init" : "supervised as init; not PID 1, a child subreaper");
  }
  if (!as_init) {
    if (job.link) {
      log::warn("--no-init: this task's command runs by exec, so the job does not supervise it (its failure does not "
                "stop the other tasks, nor does theirs stop it); only the start barrier applied");
    }
    job.link.reset();  // exec mode: only the start barrier applies
    // A relay's group reads its start before the exec ends the relay (docs/supervision.md: The start tree).
    if (relay_running()) finish_relay(std::chrono::seconds(10));
    if (auto released = release_stop_signals(); !released) return std::unexpected(released.error());
    return std::unexpected(exec_command(launch.processes.front().spec.argv, launch.processes.front().spec.environment));
  }
  auto end = supervise(options, launch, nodes, job);
  if (!end) return std::unexpected(end.error());
  if (end->reason == EndReason::restarting) {
    log::warn("{}; joining the job's start barrier again", end->message);
    if (job.link) job.link->finish(std::chrono::seconds(5));  // the coordinator's restart reaches every task before its barrier opens
    job.link.reset();
    end_orphans(options.stop_grace);
    arm_the_end_between_runs(launch);
    if (auto released = release_stop_signals(); !released) return std::unexpected(released.error());
    return std::optional<int>{};
  }
  if (end->exit_code != exit_code::ok || !options.idle_when_done) return std::optional<int>{end->exit_code};
  log::info("done; staying idle until stopped (--idle-when-done), so that a StatefulSet does not start the job again");
  return std::optional<int>{idle_until_stopped()};
}

Result<int> run_entrypoint(const Options& options, const Environment& env, const std::vector<std::string>& inherited) {
  const double started_at = unix_seconds();
  const auto started = SteadyClock::now();
  if (auto handlers = install_stop_handlers(); !handlers) return std::unexpected(handlers.error());
  set_stop_message_file(termination_log_path(options.termination_log).value_or(""));
  auto parsed = check_options(options, env);
  if (!parsed) return std::unexpected(parsed.error());
  const HostFacts facts = gather_host_facts(options.pod_info_dir.value);
  auto secret = read_secret_if_given(options);
  if (!secret) return std::unexpected(secret.error());
  auto ptr_name = find_ptr_name_if_needed(options, *parsed, facts, started);
  if (!ptr_name) return std::unexpected(ptr_name.error());
  auto plan = make_plan(options, *parsed, env, facts, *ptr_name);
  if (!plan) return std::unexpected(plan.error());
  if (auto free = check_control_port_is_free(options, *plan); !free) return std::unexpected(free.error());
  if (auto free = check_metrics_port_is_free(options, *plan); !free) return std::unexpected(free.error());
  announce(*plan);
  auto nodes = plan_framework(*plan, facts, env);
  if (!nodes) return std::unexpected(nodes.error());
  if (options.print) return print_dry_run(options, *plan, *nodes, env);
  observe::PhaseClock phases(started);  // docs/observing.md
  const bool as_init = runs_as_init(options, *plan, *nodes);
  warn_of_init_only_settings(options, as_init);
  const auto metrics_server = serve_metrics_if_asked(options, *plan, as_init, started_at);
  phases.ended(observe::Phase::plan);
  auto dns = wait_for_dns(options, *plan, facts, started);
  if (!dns) return std::unexpected(dns.error());
  phases.ended(observe::Phase::dns_wait);
  auto tf_config = make_tf_config_text(options, *plan, dns->names);  // checked before the barrier, too
  if (!tf_config) return std::unexpected(tf_config.error());
  // Once, or again after each restart in place (docs/supervision.md: Job supervision, restarts in place): a task's pod
  // may come back as a new instance with a new address, which the barrier's name check sees.
  // Files of the run before a restart in place: a restart that does not start still ends the task.
  std::optional<TaskFiles> ran_before;
  auto failed = [&ran_before](const Error& error) -> Result<int> {
    if (ran_before) {
      disarm_stop_record();
      TaskEnd end{.exit_status = error.code, .reason = "job_failed", .message = error.message};
      if (auto recorded = record_task_end(*ran_before, std::move(end)); !recorded) {
        log::warn("startup.json: the task's end is not recorded: {}", recorded.error().message);
      }
    }
    return std::unexpected(error);
  };
  for (int restarts = 0;;) {
    const double attempt_started_at = restarts == 0 ? started_at : unix_seconds();
    if (restarts > 0) phases.restarted();
    auto job = pass_start_barrier_if_supervised(options, env, *plan, facts, *secret, *nodes, started, restarts);
    if (!job) return failed(job.error());
    phases.ended(observe::Phase::barrier);
    DnsResult answers = *dns;
    if (auto completed = complete_dns_after_the_start(options, *plan, facts, *job, answers); !completed) return failed(completed.error());
    tf_config = make_tf_config_text(options, *plan, answers.names);
    if (!tf_config) return failed(tf_config.error());
    nodes->restarts = job->restarts;
    nodes->max_restarts = job->max_restarts;
    const auto interface = settle_master(options, env, facts, answers, *nodes);
    // The next run's files replace the record a stop signal would have finished.
    if (auto held = hold_stop_signals(); !held) return failed(held.error());
    disarm_stop_record();
    auto launch = write_files(options, *plan, answers, *tf_config, *job, inherited, attempt_started_at, *nodes, interface, env);
    if (!launch) return failed(launch.error());
    ran_before.reset();
    phases.ended(observe::Phase::files);
    observe_restarts(launch->files.previous.restarts, job->restarts);
    phases.command_starts();
    note_command_has_run();
    auto ran = run_command(options, *launch, *nodes, *job, runs_as_init(options, *plan, *nodes));
    if (!ran || *ran) return ran ? Result<int>(**ran) : std::unexpected(ran.error());
    ran_before = launch->files;
    restarts = job->restarts + 1;
  }
}

// The environment as a map for reading (the first of two equal keys wins, as getenv does) and
// as the list of entries it is, passed on to the command without anything but ours replaced.
struct ProcessEnvironment {
  Environment map;
  std::vector<std::string> entries;
};

ProcessEnvironment environment_from(char** envp) {
  ProcessEnvironment env;
  for (char** entry = envp; entry && *entry; ++entry) {
    std::string_view text(*entry);
    env.entries.emplace_back(text);
    auto equals = text.find('=');
    if (equals == std::string_view::npos) continue;
    env.map.emplace(std::string(text.substr(0, equals)), std::string(text.substr(equals + 1)));
  }
  return env;
}

Result<int> run_mode(const Options& options, const ProcessEnvironment& env) {
  switch (options.mode) {
    case Mode::help: std::fputs(help_text().c_str(), stdout); return exit_code::ok;
    case Mode::version: std::printf("tfboot %s (%s)\n", TFBOOT_VERSION_STRING, TFBOOT_COMMIT); return exit_code::ok;
    case Mode::local: return run_local(options, env.map, env.entries);
    case Mode::entrypoint: return run_entrypoint(options, env.map, env.entries);
  }
  return exit_code::ok;
}

// Where the termination message goes when the options themselves are wrong: the twin, if set.
std::optional<Setting> termination_log_twin(const Environment& env) {
  auto twin = env.find("TFBOOT_TERMINATION_LOG");
  if (twin == env.end() || twin->second.empty()) return std::nullopt;
  return Setting{twin->second, "TFBOOT_TERMINATION_LOG"};
}

}  // namespace

int run(int argc, char** argv, char** envp) {
  log::start();
  try {
    std::vector<std::string> args(argv + std::min(argc, 1), argv + argc);
    const ProcessEnvironment env = environment_from(envp);
    auto options = parse_options(args, env.map);
    if (!options) {
      log::configure("info", requested_log_format(args, env.map));
      log::error("{}", options.error().message);
      write_termination_log(termination_log_twin(env.map), options.error().code, options.error().message);
      return options.error().code;
    }
    log::configure(options->log_level, options->log_format);
    for (const auto& warning : options->warnings) log::warn("{}", warning);
    auto outcome = run_mode(*options, env);
    // A relay passes on what the coordinator still says to its group (an abort, a stop), until the
    // coordinator closes its connection (it does as it ends) or the silence limit, 10 s, passed
    // (docs/supervision.md: The start tree).
    if (relay_running()) finish_relay(std::chrono::seconds(10));
    const bool entrypoint = options->mode == Mode::entrypoint;
    if (!outcome) {
      log::error("{}", outcome.error().message);
      if (entrypoint) write_termination_log(options->termination_log, outcome.error().code, outcome.error().message);
      return outcome.error().code;
    }
    if (entrypoint) write_termination_log(options->termination_log, *outcome, "");
    return *outcome;
  } catch (const std::bad_alloc&) {
    log::write_from_signal_handler(log::Level::error, "out of memory (RLIMIT_AS or the container's memory limit?)");
    return exit_code::resources;
  } catch (const std::exception& error) {
    log::error("internal error: {}", error.what());
    return 1;
  }
}

}  // namespace tfboot
