// Task types, cluster and port specs, peer templates and peer names (docs/peers-and-dns.md). Pure.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/text.h"
#include "base/choices.h"
#include "base/setting.h"

namespace tfboot {

// In TF_CONFIG's key order.
enum class TaskType { chief, worker, ps, evaluator };
inline constexpr std::array all_task_types{TaskType::chief, TaskType::worker, TaskType::ps, TaskType::evaluator};

std::string_view to_string(TaskType type);
// "master" is read as chief (the name older operators used).
std::optional<TaskType> parse_task_type(std::string_view text);

// "worker:3": how a task is named in logs, errors and files.
std::string task_name(TaskType type, int index);

// Parses a non-negative decimal integer below 1'000'000; anything else is nullopt.
std::optional<int> parse_index(std::string_view text);

// Task counts per type, e.g. "chief=1,ps=2,worker=4,evaluator=1".
// Tasks of one type, at most: more, in --cluster or a platform's host list, is a typo (a range like
// [1-1000000], a runaway list), not a job.
inline constexpr int max_tasks_per_type = 100000;

struct ClusterSpec {
  std::array<int, 4> counts{};
  int count(TaskType type) const { return counts[static_cast<std::size_t>(type)]; }
};
Result<ClusterSpec> parse_cluster_spec(const Setting& setting);

// "2222" or "2222,ps=2223" (a default plus per-type overrides).
struct PortSpec {
  std::array<int, 4> ports{2222, 2222, 2222, 2222};
  int port(TaskType type) const { return ports[static_cast<std::size_t>(type)]; }
};
Result<PortSpec> parse_port_spec(const Setting& setting);

// A hostname split the way StatefulSets and Indexed Jobs name pods:
// "<prefix>-<type>-<ordinal>" or "<prefix>-<ordinal>".
struct HostnameParts {
  std::string prefix;
  std::optional<TaskType> type;
  bool type_spelled_master = false;
  int ordinal = 0;
};
std::optional<HostnameParts> split_hostname(std::string_view hostname);

// The host part of a peer's name, with {prefix} {type} {index} {ordinal} placeholders.
struct PeerTemplate {
  std::string text;
  std::string source;
  std::string prefix;  // what {prefix} stands for; empty when unknown
  bool chief_spelled_master = false;
  int ordinal_base = 0;  // 1 for docker compose replicas, which count from 1
};
Result<PeerTemplate> make_peer_template(const Setting& setting, std::optional<HostnameParts> own_hostname);
// From the own name: "<prefix>-<type>-{index}" or "<prefix>-{ordinal}"; with ordinal_base 1
// (compose) a typed name becomes "<prefix>-<type>-{ordinal}".
// `name` is the hostname, or the PTR name when ordinal_base is 1.
PeerTemplate derive_peer_template(const HostnameParts& parts, std::string_view name, int ordinal_base = 0);

// StatefulSet ordinal of a task: equal to its index, or shifted by one for workers when the
// chief is ordinal 0 of the same StatefulSet.
int ordinal_of(TaskType type, int index, bool chief_at_ordinal_0);

// The Kubernetes DNS suffix "<service>.<namespace>.svc.<domain>" of pod names.
struct DnsSuffix {
  std::string service;
  std::string kube_namespace;
  std::string domain;
  std::string text() const { return service + "." + kube_namespace + ".svc." + domain; }
};

struct PeerAddress {
  TaskType type = TaskType::worker;
  int index = 0;
  std::string name;  // as shown in TF_CONFIG, no trailing dot
  int port = 0;
  bool fully_qualified = false;  // looked up with a trailing dot, no search list
  std::string lookup_name() const { return fully_qualified ? name + "." : name; }
  std::string task() const { return task_name(type, index); }
};

// Every task of the cluster, in TF_CONFIG order (chief, worker, ps, evaluator; by index).
Result<std::vector<PeerAddress>> plan_peers(const ClusterSpec& spec, const PortSpec& ports, const PeerTemplate& peer_template,
                                            const std::optional<DnsSuffix>& suffix, bool chief_at_ordinal_0);

// A DNS name is at most 253 characters of labels of 1..63 letters, digits, '-' or '_'.
std::optional<std::string> dns_name_problem(std::string_view name);

}  // namespace tfboot
