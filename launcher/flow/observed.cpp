// The flow's hook-ins to observe/: what the start record learns from the plan, the job and the
// supervision, and the termination message at exit.
#include "flow/observed.h"

#include "base/log.h"
#include "base/text.h"
#include "framework/nodes.h"
#include "observe/endpoints.h"
#include "observe/start_record.h"
#include "observe/termination_log.h"
#include "version.h"

namespace tfboot {

Result<void> check_metrics_port_is_free(const Options& options, const Plan& plan) {
  if (options.metrics_port == 0 || options.print) return {};
  const PeerAddress* self = nullptr;
  for (const auto& peer : plan.peers) {
    if (peer.type == plan.identity.type && peer.index == plan.identity.index) self = &peer;
  }
  if (!self) return {};
  const std::string metrics = "--metrics-port (or TFBOOT_METRICS_PORT) " + std::to_string(options.metrics_port);
  // PyTorch and JAX: only node 0, the master, listens on its port (MASTER_PORT).
  if (plan.framework != Framework::tensorflow) {
    const PeerAddress& master = plan.peers.front();
    if (master.name != self->name || master.port != options.metrics_port) return {};
    return usage_error(metrics + " is MASTER_PORT, where node 0 (" + master.task() + ") listens on " + master.name +
                       (self == &master ? "" : ", this task's host") + "; choose another");
  }
  // TensorFlow: every task listens on its TF_CONFIG port, and tasks of one host (Slurm's 2222,
  // 2223) share its ports with this task's metrics server.
  for (const auto& peer : plan.peers) {
    if (peer.type == TaskType::evaluator || peer.name != self->name || peer.port != options.metrics_port) continue;
    return usage_error(metrics + " is the port task " + peer.task() + " listens on (" + join_host_port(peer.name, peer.port) +
                       (&peer == self ? ", this task's own" : ", on this task's host") + "); choose another");
  }
  return {};
}

std::unique_ptr<HttpServer> serve_metrics_if_asked(const Options& options, const Plan& plan, bool as_init, double started_at) {
  observe::update([&](observe::StartRecord& record) {
    record.version = TFBOOT_VERSION_STRING;
    record.commit = TFBOOT_COMMIT;
    record.task = plan.identity.task();
    record.framework = framework_name(plan.framework);
    record.started_at = started_at;
  });
  if (options.metrics_port == 0 || options.print) return nullptr;
  if (!as_init) {
    log::warn("--metrics-port (TFBOOT_METRICS_PORT) serves from the supervising tfboot only (init mode: PID 1 or --init); "
              "this task execs its command, so there are no metrics");
    return nullptr;
  }
  return observe::serve_start_record(options.metrics_port);
}

void observe_job(JobSettings& settings) {
  const bool coordinator = settings.self == settings.coordinator;
  observe::update([&](observe::StartRecord& record) {
    record.job_id = settings.job_id;
    record.coordinator = coordinator;
    record.tasks_expected = settings.tasks.size();
  });
  if (!coordinator) return;
  settings.on_barrier_state = [](const std::vector<StartBarrier::TaskState>& tasks, bool started) {
    std::vector<observe::TaskPresence> presence;
    presence.reserve(tasks.size());
    std::size_t present = 0;
    for (const auto& task : tasks) {
      presence.push_back({task.task.text(), task.present, task.host, task.last_error});
      present += task.present ? 1 : 0;
    }
    observe::update([&](observe::StartRecord& record) {
      record.tasks = std::move(presence);
      record.tasks_present = present;
      record.job_started = started;
    });
  };
}

void observe_preflight(const PreflightRecord& checks, bool passed, const std::string& refusal) {
  auto directory = [](const char* name, const DirectoryFigures& figures) {
    return observe::StartRecord::PreflightDirectory{name, figures.write_ms / 1000, figures.free_mib, figures.problem.empty()};
  };
  observe::update([&](observe::StartRecord& record) {
    record.preflight_seconds = checks.seconds;
    record.preflight_passed = passed;
    record.preflight_refusal = refusal;
    record.preflight_directories = {directory("log_root", checks.node.log_root)};
    if (checks.node.checkpoint_dir) record.preflight_directories.push_back(directory("checkpoint_dir", *checks.node.checkpoint_dir));
    record.preflight_accelerators = checks.accelerators;
    record.preflight_accelerators_answering = checks.accelerators_answering;
    if (checks.clock_offset_ms) record.preflight_clock_offset_seconds = static_cast<double>(*checks.clock_offset_ms) / 1000;
    if (checks.network) {
      record.preflight_network_seconds = checks.network->seconds;
      record.preflight_network_median_bits_per_second = checks.network->median_bits_per_second;
      if (checks.network->median_rtt_ms) record.preflight_network_median_rtt_seconds = *checks.network->median_rtt_ms / 1000;
      record.preflight_network_links = checks.network->links;
      record.preflight_network_warnings = static_cast<int>(checks.network->warnings.size());
    }
  });
}

void count_job_event(const JobEvent& event) {
  switch (event.kind) {
    case JobEventKind::job_done: observe::count_stop_event(observe::StopEvent::job_done); return;
    case JobEventKind::task_failed: observe::count_stop_event(observe::StopEvent::peer_failed); return;
    case JobEventKind::coordinator_lost: observe::count_stop_event(observe::StopEvent::coordinator_lost); return;
    case JobEventKind::restart: observe::count_stop_event(observe::StopEvent::restart); return;
    case JobEventKind::preempt: observe::count_stop_event(observe::StopEvent::preempted); return;
  }
}

void observe_restarts(int restarts, int job_restarts) {
  observe::update([&](observe::StartRecord& record) {
    record.restarts = restarts;
    record.job_restarts = job_restarts;
  });
}

void observe_end(const SupervisionEnd& end) {
  if (end.reason == EndReason::restarting) return;  // PhaseClock::restarted() says it
  observe::update([&](observe::StartRecord& record) {
    record.command_running = false;
    record.exit_status = end.exit_code;
    record.end_message = "exiting " + std::to_string(end.exit_code) + ": " + end.message;  // the closing line
  });
}

void write_termination_log(const std::optional<Setting>& termination_log, int exit_code, const std::string& reason) {
  if (exit_code == exit_code::ok) return;
  auto path = termination_log_path(termination_log);
  if (!path) return;
  std::string text = reason;
  if (text.empty()) text = observe::snapshot().end_message;
  if (text.empty()) text = "exited with status " + std::to_string(exit_code);
  if (auto written = write_termination_message(*path, text); !written) {
    log::warn("the termination message is not written: {}", written.error().message);
  }
}

}  // namespace tfboot
