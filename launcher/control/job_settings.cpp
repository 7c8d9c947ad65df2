// The job's control channel settings: their checks before any socket (job_settings.h).
#include "control/job_settings.h"

#include <algorithm>

namespace tfboot {

bool in_cluster(const JobSettings& settings, const JobMember& task) {
  return std::find(settings.tasks.begin(), settings.tasks.end(), task) != settings.tasks.end();
}

Result<void> check_job_settings(const JobSettings& settings) {
  if (settings.port < 1 || settings.port > 65535) return usage_error("--control-port " + std::to_string(settings.port) + " is outside 1..65535");
  if (settings.tasks.size() < 2) return usage_error("the control channel needs a job of more than one task");
  if (!in_cluster(settings, settings.self)) return usage_error("task " + settings.self.text() + " is not in the cluster");
  if (!in_cluster(settings, settings.coordinator)) return usage_error("the coordinator " + settings.coordinator.text() + " is not in the cluster");
  if (settings.job_id.size() != 16) return usage_error("the job id must be 16 hex digits");
  if (settings.heartbeat_every <= std::chrono::milliseconds::zero() || settings.peer_silent_after <= settings.heartbeat_every) {
    return usage_error("the control channel's silence limit must be longer than its heartbeat period");
  }
  if (settings.self != settings.coordinator && !settings.coordinator_addresses) {
    return usage_error("a task other than the coordinator needs a way to find the coordinator's address");
  }
  if (settings.relay_port < 1 || settings.relay_port > 65535) return usage_error("--relay-port " + std::to_string(settings.relay_port) + " is outside 1..65535");
  if (settings.tasks.size() > star_limit && settings.self != settings.coordinator && !settings.task_addresses) {
    return usage_error("a task of a job of more than " + std::to_string(star_limit) + " tasks needs a way to find its relay's address");
  }
  return {};
}

}  // namespace tfboot
