// Schedulers that already describe the job: the order in which they are asked, and what they share.
#include "plan/platforms/platforms.h"

#include <map>

namespace tfboot {

Result<std::optional<PlatformJob>> describe_job_by_platform(const PlatformInputs& in) {
  // docs/identity.md, "Platforms" says why this order: what describes this very pod first, what a
  // process may have inherited later, a file that may be a leftover in an image last.
  for (auto* read : {job_from_kubeflow, job_from_jobset, job_from_volcano, job_from_slurm, job_from_sagemaker}) {
    auto job = read(in);
    if (!job || *job) return job;
  }
  return std::optional<PlatformJob>{};
}

std::string cluster_counts_text(const std::vector<PeerAddress>& peers) {
  std::array<int, 4> counts{};
  for (const auto& peer : peers) ++counts[static_cast<std::size_t>(peer.type)];
  std::string text;
  for (TaskType type : all_task_types) {
    int count = counts[static_cast<std::size_t>(type)];
    if (count > 0) text += (text.empty() ? "" : ",") + std::string(to_string(type)) + "=" + std::to_string(count);
  }
  return text;
}

namespace platform {

std::optional<Setting> env_setting(const Environment& env, const std::string& name) {
  auto it = env.find(name);
  if (it == env.end() || it->second.empty()) return std::nullopt;
  return Setting{it->second, name};
}

Result<void> check_host_name(const std::string& host, const std::string& source) {
  if (auto problem = dns_name_problem(host)) return usage_error(source + " gives host '" + host + "', which " + *problem);
  return {};
}

Result<void> check_readable(const PlatformFiles& files, const std::string& path) {
  if (auto it = files.unreadable.find(path); it != files.unreadable.end()) {
    return usage_error(path + " exists but cannot be read (" + it->second + ")");
  }
  return {};
}

std::string first_label(std::string_view name) { return std::string(name.substr(0, name.find('.'))); }

Result<std::vector<PeerAddress>> peers_from_tasks(const TasksByType& tasks, const std::string& platform, bool fully_qualified) {
  std::vector<PeerAddress> peers;
  std::map<std::string, std::string> task_at;  // "host:port" -> task
  for (TaskType type : all_task_types) {
    const auto& list = tasks[static_cast<std::size_t>(type)];
    for (std::size_t i = 0; i < list.size(); ++i) {
      PeerAddress peer{type, static_cast<int>(i), list[i].host, list[i].port, fully_qualified};
      auto [it, inserted] = task_at.emplace(join_host_port(peer.name, peer.port), peer.task());
      if (!inserted) {
        return usage_error(platform + " gives " + it->second + " and " + peer.task() + " the same address '" + it->first + "'");
      }
      peers.push_back(std::move(peer));
    }
  }
  if (peers.empty()) return usage_error(platform + " describes a job without tasks");
  for (TaskType type : {TaskType::chief, TaskType::evaluator}) {
    if (auto count = tasks[static_cast<std::size_t>(type)].size(); count > 1) {
      return usage_error(platform + " describes " + std::to_string(count) + " " + std::string(to_string(type)) +
                         " tasks; TensorFlow allows one");
    }
  }
  return peers;
}

Result<std::vector<PeerAddress>> peers_from_ordinals(const std::vector<std::string>& hosts, const std::vector<int>& port_offsets,
                                                     const PortSpec& ports, bool chief_at_ordinal_0,
                                                     const std::string& platform) {
  TasksByType tasks;
  for (std::size_t ordinal = 0; ordinal < hosts.size(); ++ordinal) {
    Identity task = identity_from_ordinal(TaskType::worker, static_cast<int>(ordinal), chief_at_ordinal_0, "");
    int port = ports.port(task.type) + port_offsets[ordinal];
    if (port > 65535) {
      return usage_error(platform + ": " + task.task() + " on " + hosts[ordinal] + " would listen on port " + std::to_string(port) +
                         " (its type's port " + std::to_string(ports.port(task.type)) + " + " +
                         std::to_string(port_offsets[ordinal]) + "), above 65535; use a lower --port");
    }
    tasks[static_cast<std::size_t>(task.type)].push_back(Task{hosts[ordinal], port});
  }
  return peers_from_tasks(tasks, platform);
}

}  // namespace platform
}  // namespace tfboot
