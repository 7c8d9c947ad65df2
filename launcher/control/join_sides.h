// The two sides of the start barrier behind join_job (control/join.cpp): the coordinator gathers every
// task's hello and says start or abort (control/join_coordinator.cpp); a task finds the
// coordinator, proves itself and waits for that verdict (control/join_task.cpp). Both hand over a
// JobLink (control/link.h) once the job starts.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "base/log.h"
#include "control/job_settings.h"
#include "control/link.h"
#include "control/network_probe.h"
#include "control/socket.h"

namespace tfboot {

// `listener` is open on settings.port; `own` is the coordinator's own hello; `room`: the
// connections the descriptor limit allows; `probe`: --preflight network's, or none.
Result<std::unique_ptr<JobLink>> join_as_coordinator(const JobSettings& settings, Socket listener, const Hello& own,
                                                     Instant now, std::size_t room, const NetworkProbe* probe);
// `own` is the hello to send, without nonce and proof (added per challenge).
Result<std::unique_ptr<JobLink>> join_as_task(const JobSettings& settings, Hello own, Instant now, const NetworkProbe* probe);

// Both sides log the differences the start carries, as warnings, one line each.
inline void log_differences(const std::vector<std::string>& differences) {
  for (const auto& line : differences) log::warn("environment differs between tasks: {}", line);
}

}  // namespace tfboot
