// The job's control channel: the settings' checks and join_job, which runs the start barrier as
// the coordinator or as a task (control_join.h) and returns the link kept after the start
// (control_link.h). The decisions are made by the pure types of control_protocol.h.
#include "control/control.h"

#include <algorithm>

#include "control/auth.h"
#include "control/join.h"

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
  if (settings.start_timeout <= std::chrono::milliseconds::zero()) return usage_error("--start-timeout must be positive");
  if (settings.heartbeat_every <= std::chrono::milliseconds::zero() || settings.peer_silent_after <= settings.heartbeat_every) {
    return usage_error("the control channel's silence limit must be longer than its heartbeat period");
  }
  if (settings.self != settings.coordinator && !settings.coordinator_addresses) {
    return usage_error("a task other than the coordinator needs a way to find the coordinator's address");
  }
  return {};
}

Result<std::unique_ptr<JobLink>> join_job(const JobSettings& settings, const Fingerprint& own) {
  if (auto valid = check_job_settings(settings); !valid) return std::unexpected(valid.error());
  auto instance = make_nonce();
  if (!instance) return std::unexpected(instance.error());
  Hello hello{settings.job_id, settings.self, settings.hostname, instance->substr(0, 16), settings.supervise,
              settings.own_name, settings.own_addresses, own, "", ""};
  // Strings that go on the wire are bounded there; cut here so that our own hello is never refused.
  hello.host = hello.host.substr(0, 253);
  hello.name = hello.name.substr(0, 253);
  if (hello.addresses.size() > 64) hello.addresses.resize(64);
  const Instant now = std::chrono::steady_clock::now();
  if (settings.self != settings.coordinator) return join_as_task(settings, std::move(hello), now);
  auto listener = open_listener(settings.port);
  if (!listener) return std::unexpected(listener.error());
  return join_as_coordinator(settings, std::move(*listener), hello, now);
}

}  // namespace tfboot
