// The flow's hook-ins to observe/ (docs/observing.md): the metrics server of the
// supervising tfboot, the job's state as the record keeps it, and the termination message.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "base/setting.h"
#include "cli/options.h"
#include "control/job_settings.h"
#include "control/protocol/watch.h"
#include "flow/preflight.h"
#include "observe/http_server.h"
#include "plan/plan.h"
#include "supervise/loop.h"

namespace tfboot {

// --metrics-port must not be a port a command of this host listens on: this task's own (its
// TF_CONFIG port; for PyTorch and JAX, node 0's MASTER_PORT) or another task's on the same host.
// The server would take it first and the trainer's bind would fail. Exit 2, before any effect.
Result<void> check_metrics_port_is_free(const Options& options, const Plan& plan);

// The record's build info, and the metrics server when --metrics-port asks for one and tfboot
// supervises the command (`as_init`); exec mode leaves nothing to serve, said once as a warning.
std::unique_ptr<HttpServer> serve_metrics_if_asked(const Options& options, const Plan& plan, bool as_init, double started_at);

// The job's id in the record, and the coordinator's barrier reporting into it.
void observe_job(JobSettings& settings);

// --preflight: this task's checks (each one's figure, the time they took) and the job's verdict
// (`refusal` when it refused).
void observe_preflight(const PreflightRecord& checks, bool passed, const std::string& refusal = "");

// One of the job's decisions, counted.
void count_job_event(const JobEvent& event);

// Once the files are written: startup.json's count of earlier starts in the log dir, and the
// job's restarts in place.
void observe_restarts(int restarts, int job_restarts);

// How the supervision ended: the command is no longer running, its status, the closing line.
void observe_end(const SupervisionEnd& end);

// On a non-zero exit, `reason` (else the supervision's closing line, else the status) to
// --termination-log or Kubernetes' default file. A failure is a warning: never another exit code.
void write_termination_log(const std::optional<Setting>& termination_log, int exit_code, const std::string& reason);

}  // namespace tfboot
